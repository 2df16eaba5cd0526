/* exp of every lane for the softmax, whose arguments (s - max, m - m_new) are never positive,
 * written once for the vector ISAs over their vocabulary and included at the end of each
 * simd_<isa>.h (scalar keeps libm's expf as the reference). Inline, so the softmax keeps its
 * vectors in registers instead of calling SLEEF per vector.
 *
 * x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two floats, each
 * product fused, so r is exact to well under an ulp); exp(r) by a degree-6 polynomial
 * 1 + r + c2 r^2 + ... + c6 r^6 (its coefficients fitted to exp's relative error on that
 * interval: 3e-9, under 0.03 ulp); then times 2^n. x is raised to -104 first (NaN stays NaN):
 * below, exp rounds to 0, and -inf (a dropped key) would make r NaN. No upper clamp: x <= 0
 * (it cost a tenth of the softmax's time, Zen 5: 6 rows of 512 scores, 11.0 -> 10.0 cycles
 * per vector; a positive x up to 88 would still be right, past it AVX2's and NEON's 2^n
 * overflows). Measured against exp in double over every float in [-105, 0]: at most 0.91 ulp,
 * denormal results included (SLEEF's expf_u10: 0.99); tests/core/test_kernels.c checks 1 ulp. */
#ifndef MH_GENERIC_VEXP_H
#define MH_GENERIC_VEXP_H

MH_INLINE mh_vf mh_vexp(mh_vf x) {
    x = mh_vclamp_lo(x, -104.0f);
    const mh_vf n = mh_vround(mh_vmul(x, mh_vset1(0x1.715476p+0f))); /* x / ln2 */
    mh_vf r = mh_vfma(n, mh_vset1(-0x1.62e430p-1f), x);             /* - n ln2 (high part) */
    r = mh_vfma(n, mh_vset1(0x1.05c610p-29f), r);                    /* - n ln2 (low part) */
    mh_vf p = mh_vset1(0x1.6a244cp-10f);
    p = mh_vfma(p, r, mh_vset1(0x1.1239d4p-7f));
    p = mh_vfma(p, r, mh_vset1(0x1.5558f2p-5f));
    p = mh_vfma(p, r, mh_vset1(0x1.555492p-3f));
    p = mh_vfma(p, r, mh_vset1(0x1.fffffcp-2f));
    p = mh_vfma(p, r, mh_vset1(1.0f));
    p = mh_vfma(p, r, mh_vset1(1.0f));
    return mh_vscale2n(p, n);
}

#endif
