/* Configure-time probe: can this compiler build AVX-512 code that calls the SLEEF function its vocabulary uses (sincosf)? */
#include <immintrin.h>
#include <sleef.h>
int main(void) {
    __m512 x = _mm512_set1_ps(1.0f);
    x = _mm512_fmadd_ps(x, x, Sleef_sincosf16_u10avx512f(x).x);
    return (int)_mm512_reduce_add_ps(x);
}
