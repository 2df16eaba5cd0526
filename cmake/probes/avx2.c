/* Configure-time probe: can this compiler build AVX2+FMA code that calls the SLEEF function its vocabulary uses (sincosf)? */
#include <immintrin.h>
#include <sleef.h>
int main(void) {
    __m256 x = _mm256_set1_ps(1.0f);
    x = _mm256_fmadd_ps(x, x, Sleef_sincosf8_u10avx2(x).x);
    return (int)_mm256_cvtss_f32(x);
}
