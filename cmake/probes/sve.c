/* Configure-time probe: can this compiler build SVE code that calls SLEEF? */
#include <arm_sve.h>
#include <sleef.h>
int main(void) {
    svbool_t pg = svptrue_b32();
    svfloat32_t x = svdup_f32(1.0f);
    x = svmla_f32_x(pg, x, x, Sleef_expfx_u10sve(x));
    return (int)svaddv_f32(pg, x);
}
