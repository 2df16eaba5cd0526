#include "core/gemm.h"

#include <string.h>

#include "core/parallel.h"
#include "util/alloc.h"
#include "util/checked.h"

/* Blocking (BLIS-style): a task is GEMM_ROW_BLOCK rows x one panel; the reduction runs in
 * blocks of GEMM_KC so the panel slice [KC][NR] stays in L2 while every row strip of the task
 * reuses it. Blocks after the first accumulate onto C in a fixed order. */
#define GEMM_ROW_BLOCK 240
#define GEMM_KC 256

/* The rescale factors of a plain accumulation (gemm_acc with alpha = 1). */
static const float k_ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

mh_status mh_pack_matrix(const mh_kernels* k, const float* w, const float* bias, int n_out,
                         int k_in, mh_packed_matrix* out) {
    memset(out, 0, sizeof *out);
    const size_t nr = k->gemm_nr, n_panels = ((size_t)n_out + nr - 1) / nr;
    size_t panel_elems, bias_bytes = bias ? (size_t)n_out * sizeof(float) : 0, bytes;
    if (!mh_mul3_size(n_panels, nr, (size_t)k_in, &panel_elems) ||
        !mh_mul_size(panel_elems, sizeof(float), &bytes) || !mh_add_size(bytes, bias_bytes, &bytes))
        return MH_ERR_SIZE_OVERFLOW;
    float* panels = mh_alloc(panel_elems * sizeof(float));
    float* b = bias ? mh_alloc(bias_bytes) : NULL;
    if (!panels || (bias && !b)) {
        mh_free(panels);
        mh_free(b);
        return MH_ERR_OUT_OF_MEMORY;
    }
    for (size_t p = 0; p < n_panels; p++) {
        float* dst = panels + p * (size_t)k_in * nr;
        for (size_t c = 0; c < nr && p * nr + c < (size_t)n_out; c++) {
            const float* src = w + (p * nr + c) * (size_t)k_in;
            for (size_t kk = 0; kk < (size_t)k_in; kk++) dst[kk * nr + c] = src[kk];
        }
    }
    if (b) memcpy(b, bias, bias_bytes);
    out->panels = panels, out->bias = b, out->n_out = n_out, out->k_in = k_in, out->nr = nr;
    out->bytes = bytes;
    return MH_OK;
}

void mh_packed_matrix_free(mh_packed_matrix* m) {
    mh_free(m->panels);
    mh_free(m->bias);
    memset(m, 0, sizeof *m);
}

/* Everything the workers of one GEMM share. */
typedef struct gemm_call {
    const mh_kernels* k;
    size_t rows;
    const float* x;
    size_t ldx;
    const mh_packed_matrix* w;
    float* y;
    size_t ldy;
    size_t n_row_blocks, n_tasks;
    int acc; /* 1: add onto y (no bias) */
} gemm_call;

/* Tasks are dealt round-robin: consecutive tasks share a panel (below), so concurrent workers
 * work on the same panel and find it in the shared cache. */
static void gemm_worker(void* arg, int tid, int nth) {
    const gemm_call* g = arg;
    const mh_kernels* k = g->k;
    const mh_packed_matrix* w = g->w;
    const size_t nr = w->nr, mr = k->gemm_mr, kin = (size_t)w->k_in;
    for (size_t t = (size_t)tid; t < g->n_tasks; t += (size_t)nth) {
        const size_t rb = t % g->n_row_blocks, p = t / g->n_row_blocks;
        const size_t c0 = p * nr, nc = (size_t)w->n_out - c0 < nr ? (size_t)w->n_out - c0 : nr;
        const size_t r_end = (rb + 1) * GEMM_ROW_BLOCK < g->rows ? (rb + 1) * GEMM_ROW_BLOCK : g->rows;
        const float* panel = w->panels + p * kin * nr;
        const float* bias = w->bias && !g->acc ? w->bias + c0 : NULL;
        for (size_t k0 = 0; k0 < kin; k0 += GEMM_KC) {
            const size_t kc = kin - k0 < GEMM_KC ? kin - k0 : GEMM_KC;
            for (size_t r = rb * GEMM_ROW_BLOCK; r < r_end; r += mr) {
                const size_t m = r_end - r < mr ? r_end - r : mr;
                const float* a = g->x + r * g->ldx + k0;
                float* c = g->y + r * g->ldy + c0;
                if (k0 == 0 && !g->acc) k->gemm(m, nc, kc, a, g->ldx, panel, bias, c, g->ldy);
                else k->gemm_acc(m, nc, kc, a, g->ldx, panel + k0 * nr, k_ones, c, g->ldy);
            }
        }
    }
}

/* Each output element is one reduction, in a fixed order, by one task: thread-count
 * independent. */
static void run_gemm(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                     const mh_packed_matrix* w, float* y, size_t ldy, int acc) {
    const size_t n_panels = ((size_t)w->n_out + w->nr - 1) / w->nr;
    const size_t n_row_blocks = (rows + GEMM_ROW_BLOCK - 1) / GEMM_ROW_BLOCK;
    gemm_call g = {k, rows, x, ldx, w, y, ldy, n_row_blocks, n_row_blocks * n_panels, acc};
    const double flops = 2.0 * (double)rows * (double)w->k_in * w->n_out;
    mh_parallel(mh_workers(threads, g.n_tasks, flops), gemm_worker, &g);
}

void mh_gemm_packed(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                    const mh_packed_matrix* w, float* y, size_t ldy) {
    run_gemm(k, threads, rows, x, ldx, w, y, ldy, 0);
}

void mh_gemm_packed_acc(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                        const mh_packed_matrix* w, float* y, size_t ldy) {
    run_gemm(k, threads, rows, x, ldx, w, y, ldy, 1);
}
