#include "core/gemm.h"

#include <string.h>

#include "core/parallel.h"
#include "util/alloc.h"
#include "util/checked.h"

/* Blocking (BLIS-style): a task is GEMM_ROW_BLOCK rows (a whole number of micro-tiles:
 * AMX's blocks of 32, 224) x one panel (bf16: GROUP_BF16 panels,
 * below); the reduction runs in blocks of GEMM_KC so the panel slice [KC][NR] stays in L2
 * while every row strip of the task reuses it. Blocks after the first accumulate onto C in a
 * fixed order. A block is one FMA chain per output, so its length sets the rounding error as
 * well as the calls' overhead: blocks of 1024 took 0.96-0.98x the time of MHA layers (Zen 5,
 * d_model 1024-4096) but doubled their error against the double oracle (4.3e-7 -> 8.3e-7). */
#define GEMM_ROW_BLOCK 240
#define GEMM_KC 256

/* Bytes of x (rows x k_in) of one super-block of row blocks: the tasks of a super-block run
 * panel group by panel group (all its row blocks against one group, then the next), so W
 * streams from memory once per super-block and x's rows, once read, stay in the last-level
 * cache until every panel has used them. A call with more x than this splits its row blocks
 * into near-equal super-blocks. With a single super-block a call whose x outgrew the cache read
 * x from memory once per panel group (a projection of d_model 4096 over 2048 tokens, 32 MiB
 * of x: 64 times; that layer, Zen 5, 1 thread, 0.92x the time with super-blocks, 239 instead
 * of 214 GFLOP/s per GEMM). */
#define GEMM_X_BUDGET ((size_t)8 << 20)

/* The rescale factors of a plain accumulation (gemm_acc with alpha = 1). */
static const float k_ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* W [n_out, k_in] into f32 panels [k_in][nr] of nr rows of W each. */
static void pack_f32(size_t nr, const float* w, size_t n_out, size_t k_in, size_t n_panels, float* panels) {
    for (size_t p = 0; p < n_panels; p++) {
        float* dst = panels + p * k_in * nr;
        for (size_t c = 0; c < nr && p * nr + c < n_out; c++) {
            const float* src = w + (p * nr + c) * k_in;
            for (size_t kk = 0; kk < k_in; kk++) dst[kk * nr + c] = src[kk];
        }
    }
}

mh_status mh_pack_matrix(const mh_kernels* k, mh_compute compute, const float* w, const float* bias,
                         int n_out, int k_in, mh_packed_matrix* out) {
    memset(out, 0, sizeof *out);
    const int bf16 = compute == MH_COMPUTE_BF16;
    const size_t nr = k->gemm_nr, n_panels = ((size_t)n_out + nr - 1) / nr;
    /* bf16 panels hold k in pairs: an odd k_in takes one zero pad row */
    const size_t rows_k = bf16 ? ((size_t)k_in + 1) / 2 * 2 : (size_t)k_in;
    const size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
    size_t all_elems, panel_bytes, bias_bytes = bias ? (size_t)n_out * sizeof(float) : 0, bytes;
    if (!mh_mul3_size(n_panels, nr, rows_k, &all_elems) || !mh_mul_size(all_elems, elem, &panel_bytes) ||
        !mh_add_size(panel_bytes, bias_bytes, &bytes))
        return MH_ERR_SIZE_OVERFLOW;
    void* panels = mh_alloc(panel_bytes);
    float* b = bias ? mh_alloc(bias_bytes) : NULL;
    if (!panels || (bias && !b)) {
        mh_free(panels);
        mh_free(b);
        return MH_ERR_OUT_OF_MEMORY;
    }
    if (bf16) {
        const mh_rows rows = {.data = w, .ld = k_in, .dtype = MH_DTYPE_F32};
        k->pack_kt_bf16((size_t)n_out, (size_t)k_in, &rows, panels);
    } else {
        pack_f32(nr, w, (size_t)n_out, (size_t)k_in, n_panels, panels); /* mh_alloc zeroed the pad */
    }
    if (b) memcpy(b, bias, bias_bytes);
    out->panels = panels, out->bias = b, out->compute = bf16 ? MH_COMPUTE_BF16 : MH_COMPUTE_F32;
    out->n_out = n_out, out->k_in = k_in, out->nr = nr, out->panel_elems = rows_k * nr, out->bytes = bytes;
    return MH_OK;
}

void mh_packed_matrix_free(mh_packed_matrix* m) {
    mh_free(m->panels);
    mh_free(m->bias);
    memset(m, 0, sizeof *m);
}

/* Everything the workers of one GEMM share. A task is a row block x a group of panels. */
typedef struct gemm_call {
    const mh_kernels* k;
    size_t rows;
    const float* x;
    size_t ldx;
    const uint16_t* xr; /* x already rounded (mh_gemm_packed_rounded), else NULL */
    size_t ldxr;
    const mh_packed_matrix* w;
    float* y;
    size_t ldy;
    size_t n_panels, group; /* panels, and panels per task */
    size_t row_block;       /* rows of a task: GEMM_ROW_BLOCK, less what would be a partial micro-tile */
    size_t sub_rows;        /* rows of a task's row block taken at a time (a multiple of MR) */
    size_t n_row_blocks, n_tasks;
    size_t super_blocks;    /* row blocks per super-block (GEMM_X_BUDGET) */
    int acc; /* 1: add onto y (no bias) */
} gemm_call;

/* A bf16 task rounds SUB_ROWS_BF16 rows of x at a time into a stack buffer of
 * [SUB_ROWS_BF16][GEMM_KC] bf16 (16 KiB) and runs them against GROUP_BF16 panels: x is read
 * and rounded once per eight panels, not once per panel, which cost a fifth of the GEMM's time
 * (the rounding's reads of x missed the caches in a burst before each micro-tile). Sixteen
 * panels did no better on Zen 4 and took 1.02-1.03x the time on Zen 5 (docs/architecture.md). */
#define SUB_ROWS_BF16 32
#define GROUP_BF16 8
_Static_assert(SUB_ROWS_BF16 >= MH_GEMM_MR_MAX, "a bf16 sub-block holds at least one micro-tile of rows");

/* The micro-tiles of rows [r0, r1) of a task against panel p, reduction block [k0, k0 + kc):
 * f32 reads x in place; bf16 reads xb, those rows rounded (row r0's block, rows ldb apart).
 * `first`: the first block of a plain (not acc) call, which sets C (with the bias, if any)
 * instead of adding to it; bf16 sets the bias first and adds the products. */
static void strips(const gemm_call* g, size_t r0, size_t r1, size_t k0, size_t kc, size_t p, const uint16_t* xb,
                   size_t ldb) {
    const mh_kernels* k = g->k;
    const mh_packed_matrix* w = g->w;
    const size_t nr = w->nr, c0 = p * nr, nc = mh_min_size(nr, (size_t)w->n_out - c0);
    const int first = k0 == 0 && !g->acc;
    const float* bias = first && w->bias ? w->bias + c0 : NULL;
    const size_t mr = mh_kernels_gemm_mr(k, w->compute);
    for (size_t r = r0; r < r1; r += mr) {
        const size_t m = mh_min_size(mr, r1 - r);
        float* c = g->y + r * g->ldy + c0;
        if (w->compute == MH_COMPUTE_BF16) {
            /* k0 is a multiple of GEMM_KC (even): its pairs start k0 / 2 pair rows in */
            const uint16_t* panel = (const uint16_t*)w->panels + p * w->panel_elems;
            const uint16_t* a = xb + (r - r0) * ldb;
            for (size_t i = 0; bias && i < m; i++) memcpy(c + i * g->ldy, bias, nc * sizeof(float));
            if (first && !bias) k->gemm_bf16(m, nc, kc, a, ldb, panel, c, g->ldy, NULL);
            else k->gemm_acc_bf16(m, nc, kc, a, ldb, panel + k0 * nr, k_ones, c, g->ldy, NULL);
        } else {
            const float* panel = (const float*)w->panels + p * w->panel_elems;
            const float* a = g->x + r * g->ldx + k0;
            if (first) k->gemm(m, nc, kc, a, g->ldx, panel, bias, c, g->ldy, NULL);
            else k->gemm_acc(m, nc, kc, a, g->ldx, panel + k0 * nr, k_ones, c, g->ldy, NULL);
        }
    }
}

/* Tasks are dealt round-robin: consecutive tasks share a panel group (below), so concurrent
 * workers work on the same panels and find them in the shared cache. Task t is a row block of
 * its super-block against a panel group; the super-blocks run in turn. */
static void gemm_worker(void* arg, int tid, int nth) {
    const gemm_call* g = arg;
    const size_t kin = (size_t)g->w->k_in;
    uint16_t xb[SUB_ROWS_BF16 * GEMM_KC]; /* bf16: [sub rows][GEMM_KC], an odd kc's pad zero */
    const size_t per_super = g->super_blocks * ((g->n_panels + g->group - 1) / g->group); /* tasks */
    for (size_t t = (size_t)tid; t < g->n_tasks; t += (size_t)nth) {
        const size_t s0 = t / per_super * g->super_blocks, in = t % per_super;
        const size_t nb = mh_min_size(g->super_blocks, g->n_row_blocks - s0); /* the last may be short */
        const size_t rb = s0 + in % nb, p0 = in / nb * g->group;
        const size_t p1 = mh_min_size(p0 + g->group, g->n_panels);
        const size_t r_end = mh_min_size((rb + 1) * g->row_block, g->rows);
        for (size_t k0 = 0; k0 < kin; k0 += GEMM_KC) {
            const size_t kc = mh_min_size(GEMM_KC, kin - k0);
            for (size_t r0 = rb * g->row_block; r0 < r_end; r0 += g->sub_rows) {
                const size_t r1 = mh_min_size(r0 + g->sub_rows, r_end);
                if (g->xr) {
                    for (size_t p = p0; p < p1; p++) strips(g, r0, r1, k0, kc, p, g->xr + r0 * g->ldxr + k0, g->ldxr);
                    continue;
                }
                if (g->w->compute == MH_COMPUTE_BF16) mh_round_rows(g->k, r1 - r0, kc, g->x + r0 * g->ldx + k0, g->ldx, xb, GEMM_KC);
                for (size_t p = p0; p < p1; p++) strips(g, r0, r1, k0, kc, p, xb, GEMM_KC);
            }
        }
    }
}

/* Each output element is one reduction, in a fixed order (blocks of GEMM_KC ascending), by
 * one task: thread-count independent. */
static void run_gemm(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx, const uint16_t* xr,
                     size_t ldxr, const mh_packed_matrix* w, float* y, size_t ldy, int acc) {
    const int bf16 = w->compute == MH_COMPUTE_BF16;
    const size_t n_panels = ((size_t)w->n_out + w->nr - 1) / w->nr, group = bf16 ? GROUP_BF16 : 1;
    const size_t mr = mh_kernels_gemm_mr(k, w->compute);
    const size_t row_block = GEMM_ROW_BLOCK / mr * mr; /* whole micro-tiles (AMX's 32: 224) */
    const size_t n_row_blocks = (rows + row_block - 1) / row_block;
    const size_t sub_rows = bf16 ? SUB_ROWS_BF16 / mr * mr : row_block;
    const size_t n_tasks = n_row_blocks * ((n_panels + group - 1) / group);
    const double x_bytes = (double)rows * (double)w->k_in * sizeof(float); /* double: no overflow */
    size_t n_super = (size_t)(x_bytes / (double)GEMM_X_BUDGET);
    if (n_super == 0 || (double)n_super * (double)GEMM_X_BUDGET < x_bytes) n_super++;
    const size_t super_blocks = (n_row_blocks + n_super - 1) / n_super;
    gemm_call g = {k,        rows,      x,        ldx,          xr,      ldxr,         w, y, ldy,
                   n_panels, group,     row_block, sub_rows,     n_row_blocks, n_tasks, super_blocks, acc};
    const double flops = 2.0 * (double)rows * (double)w->k_in * w->n_out;
    mh_parallel(mh_workers(threads, g.n_tasks, flops), gemm_worker, &g);
}

void mh_gemm_packed(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                    const mh_packed_matrix* w, float* y, size_t ldy) {
    run_gemm(k, threads, rows, x, ldx, NULL, 0, w, y, ldy, 0);
}

void mh_gemm_packed_acc(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                        const mh_packed_matrix* w, float* y, size_t ldy) {
    run_gemm(k, threads, rows, x, ldx, NULL, 0, w, y, ldy, 1);
}

void mh_round_rows(const mh_kernels* k, size_t rows, size_t k_in, const float* x, size_t ldx, uint16_t* xr,
                   size_t ldxr) {
    for (size_t r = 0; r < rows; r++) {
        k->round_bf16(k_in, x + r * ldx, xr + r * ldxr);
        if (k_in % 2) xr[r * ldxr + k_in] = 0;
    }
}

void mh_gemm_packed_rounded(const mh_kernels* k, int threads, size_t rows, const uint16_t* xr, size_t ldxr,
                            const mh_packed_matrix* w, float* y, size_t ldy) {
    run_gemm(k, threads, rows, NULL, 0, xr, ldxr, w, y, ldy, 0);
}
