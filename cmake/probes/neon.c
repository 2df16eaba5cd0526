/* Configure-time probe: can this compiler build NEON code that calls the SLEEF function its vocabulary uses (sincosf)? */
#include <arm_neon.h>
#include <sleef.h>
int main(void) {
    float32x4_t x = vdupq_n_f32(1.0f);
    x = vfmaq_f32(x, x, Sleef_sincosf4_u10advsimd(x).x);
    return (int)vgetq_lane_f32(x, 0);
}
