/* Configure-time probe: can this compiler build SVE BF16 code (BFDOT)? */
#include <arm_sve.h>
int main(void) {
    const svbfloat16_t x = svreinterpret_bf16_u32(svdup_n_u32(0x3f803f80u));
    const svfloat32_t acc = svbfdot_f32(svdup_n_f32(0.0f), x, x);
    return (int)svaddv_f32(svptrue_b32(), acc);
}
