/* Configure-time probe: can this compiler build Arm BF16 code (BFDOT)? */
#include <arm_neon.h>
int main(void) {
    const bfloat16x8_t x = vreinterpretq_bf16_u32(vdupq_n_u32(0x3f803f80u));
    const float32x4_t acc = vbfdotq_f32(vdupq_n_f32(0.0f), x, x);
    return (int)vgetq_lane_f32(acc, 0);
}
