/* Configure-time probe: can this compiler build SVE code that calls the SLEEF function its vocabulary uses (sincosf)? */
#include <arm_sve.h>
#include <sleef.h>
int main(void) {
    svbool_t pg = svptrue_b32();
    svfloat32_t x = svdup_f32(1.0f);
    x = svmla_f32_x(pg, x, x, svget2_f32(Sleef_sincosfx_u10sve(x), 0));
    return (int)svaddv_f32(pg, x);
}
