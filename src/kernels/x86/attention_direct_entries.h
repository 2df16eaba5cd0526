/* The x86 direct kernels' entry points, included at the end of attention_direct_<isa>.c and
 * attention_direct_w64_<isa>.c after the ISA's bodies (attention_direct_<isa>.h: qk_r, pv_r
 * and their MH_ROWS_FNS, qk_heads_rows); qk_heads is in the first only. In the copy for head width 64 (MH_DIRECT_COPY_W64) they are that
 * copy's; otherwise the slots qk_direct and pv_direct, which hand width 64 to the copy
 * (MH_DIRECT_W64) and run the other widths out of line, so each entry is a width test and a
 * tail call: an entry that held the kernels and called the copy (its arguments past the sixth
 * on the stack) realigned its frame around them at every call, and GQA-8 decode on K/V in L2
 * took 1.02-1.03x the time (Zen 5). */
#ifdef MH_DIRECT_COPY_W64
void MH_KNAME(qk_direct_w64)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k,
                             float* s, size_t lds) {
    MH_WITH_ROWS(rows, qk_r, cols, d, q, ldq, k, s, lds)
}

void MH_KNAME(pv_direct_w64)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                             const float* alpha, float* o, size_t ldo) {
    MH_WITH_ROWS(rows, pv_r, cols, dv, p, ldp, v, alpha, o, ldo)
}
#else
static __attribute__((noinline)) void qk_any(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                                             const mh_rows* k, float* s, size_t lds) {
    MH_WITH_ROWS(rows, qk_r, cols, d, q, ldq, k, s, lds)
}

static __attribute__((noinline)) void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                                             const mh_rows* v, const float* alpha, float* o, size_t ldo) {
    MH_WITH_ROWS(rows, pv_r, cols, dv, p, ldp, v, alpha, o, ldo)
}

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k,
                         float* s, size_t lds) {
    if (MH_DIRECT_W64 && d == 64) MH_KNAME(qk_direct_w64)(rows, cols, d, q, ldq, k, s, lds);
    else qk_any(rows, cols, d, q, ldq, k, s, lds);
}

void MH_KNAME(pv_direct)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                         const float* alpha, float* o, size_t ldo) {
    if (MH_DIRECT_W64 && dv == 64) MH_KNAME(pv_direct_w64)(rows, cols, dv, p, ldp, v, alpha, o, ldo);
    else pv_any(rows, cols, dv, p, ldp, v, alpha, o, ldo);
}

void MH_KNAME(qk_heads)(size_t heads, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s,
                        size_t lds) {
    if (heads == 0) return;
    MH_DIRECT_WIDTH(d, dk, MH_WITH_DTYPE(k[0].dtype, qk_heads_rows, heads, cols, dk, q, ldq, k, s, lds))
}
#endif
