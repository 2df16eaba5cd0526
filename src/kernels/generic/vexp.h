/* exp of every lane for the softmax, whose arguments (s - max, m - m_new) are never positive,
 * written once for the vector ISAs over their vocabulary and included at the end of each
 * simd_<isa>.h (scalar keeps libm's expf as the reference). Inline, so the softmax keeps its
 * vectors in registers instead of calling SLEEF per vector.
 *
 * x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two floats, each
 * product fused, so r is exact to well under an ulp); exp(r) by a degree-6 polynomial
 * 1 + r + c2 r^2 + ... + c6 r^6 (its coefficients fitted to exp's relative error on that
 * interval: 3e-9, under 0.03 ulp); then times 2^n. x is raised to -104 first (NaN stays NaN):
 * below, exp rounds to 0, and -inf (a dropped key) would make r NaN. What the raise added is
 * taken off n again (-inf for -inf), so a dropped key's 2^n is exactly 0 and its product no
 * underflow: Intel's cores take a microcode assist on every vector with an underflowing lane
 * (causal prefill N = M = 128, H8 D64, on a Xeon: the call took 1.6x the time it took with
 * FTZ set, as the -inf lanes of each row's diagonal and tail went through 2^-150). No upper clamp: x <= 0
 * (it cost a tenth of the softmax's time, Zen 5: 6 rows of 512 scores, 11.0 -> 10.0 cycles
 * per vector; a positive x up to 88 would still be right, past it AVX2's and NEON's 2^n
 * overflows). Measured against exp in double over every float in [-105, 0]: at most 0.91 ulp,
 * denormal results included (SLEEF's expf_u10: 0.99); tests/core/test_kernels.c checks 1 ulp. */
#ifndef MH_GENERIC_VEXP_H
#define MH_GENERIC_VEXP_H

/* exp of four vectors in lock step: each stage for all four before the next. One vector's exp
 * is a chain of a dozen dependent operations; four chains side by side give the core
 * independent work at every step (softmax_tile's exp pass over 6 rows of 512 scores in L1,
 * Zen 5: 0.92x the time of one vector at a time, the same bits). Pointers, not an array: SVE's
 * vectors have no size. */
MH_INLINE void mh_vexp4(mh_vf* x0, mh_vf* x1, mh_vf* x2, mh_vf* x3) {
    mh_vf* const x[4] = {x0, x1, x2, x3};
#define MH_VEXP_EACH(stmt) for (int i = 0; i < 4; i++) stmt
    mh_vf n0, n1, n2, n3, r0, r1, r2, r3, p0, p1, p2, p3, d0, d1, d2, d3;
    mh_vf* const n[4] = {&n0, &n1, &n2, &n3};
    mh_vf* const r[4] = {&r0, &r1, &r2, &r3};
    mh_vf* const p[4] = {&p0, &p1, &p2, &p3};
    mh_vf* const d[4] = {&d0, &d1, &d2, &d3};
    MH_VEXP_EACH(*d[i] = *x[i]);
    MH_VEXP_EACH(*x[i] = mh_vclamp_lo(*x[i], -104.0f));
    MH_VEXP_EACH(*d[i] = mh_vsub(*d[i], *x[i])); /* what the raise added: 0, or below it */
    MH_VEXP_EACH(*n[i] = mh_vround(mh_vmul(*x[i], mh_vset1(0x1.715476p+0f)))); /* x / ln2 */
    MH_VEXP_EACH(*r[i] = mh_vfma(*n[i], mh_vset1(-0x1.62e430p-1f), *x[i]));    /* - n ln2 (high part) */
    MH_VEXP_EACH(*r[i] = mh_vfma(*n[i], mh_vset1(0x1.05c610p-29f), *r[i]));    /* - n ln2 (low part) */
    MH_VEXP_EACH(*n[i] = mh_vadd(*n[i], *d[i])); /* below -150 only where exp rounds to 0 */
    MH_VEXP_EACH(*p[i] = mh_vfma(mh_vset1(0x1.6a244cp-10f), *r[i], mh_vset1(0x1.1239d4p-7f)));
    MH_VEXP_EACH(*p[i] = mh_vfma(*p[i], *r[i], mh_vset1(0x1.5558f2p-5f)));
    MH_VEXP_EACH(*p[i] = mh_vfma(*p[i], *r[i], mh_vset1(0x1.555492p-3f)));
    MH_VEXP_EACH(*p[i] = mh_vfma(*p[i], *r[i], mh_vset1(0x1.fffffcp-2f)));
    MH_VEXP_EACH(*p[i] = mh_vfma(*p[i], *r[i], mh_vset1(1.0f)));
    MH_VEXP_EACH(*p[i] = mh_vfma(*p[i], *r[i], mh_vset1(1.0f)));
    MH_VEXP_EACH(*x[i] = mh_vscale2n(*p[i], *n[i]));
#undef MH_VEXP_EACH
}

/* exp of one vector: the same operations (the three copies are dead and compiled away). */
MH_INLINE mh_vf mh_vexp(mh_vf x) {
    mh_vf a = x, b = x, c = x;
    mh_vexp4(&x, &a, &b, &c);
    return x;
}

#endif
