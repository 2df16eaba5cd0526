/*
 * The one attention driver: task enumeration, workspace layout, K/V prepack, split-KV, the
 * worker loop and the finish step, for every variant. A variant describes its call as a
 * STAGE (mh_drv_stage: shapes, tensors and a few hooks) and calls mh_drv_carve / mh_drv_run.
 *
 * Tasks. A call's tasks are (batch b, stream s, query tile): a stream is hg consecutive query
 * heads [s * hg, s * hg + hg) that the task computes together, so each K/V tile it reads
 * serves all of them. Task ti is b = ti / (n_qt * streams), s = ti / n_qt % streams, queries
 * [i0, i0 + nq) with i0 = ti % n_qt * tq. Its rows are head-major: r = hh * nq + ii.
 *
 * Modes.
 *   MH_DRV_ONE_PASS (MHA/GQA/MQA, MoH, CollabHead): online softmax, key tile by key tile:
 *     the driver runs Q.K^T (direct or packed GEMM against the stream's K), the stage's
 *     optional bias hook, the score step (core/score.h), softmax_tile and P.V (against the
 *     stream's V, or each head's V with v_per_head); then the finish (sink, 1/l, gates) and
 *     the probabilities. Decode-shaped calls split keys (core/split_kv.h).
 *   MH_DRV_TWO_PASS / MH_DRV_MATERIALISED (DCMHA): pass 1 makes each key tile's
 *     exponentials and the rows' softmax statistics (hook exp_tile), pass 2 turns the same
 *     tiles into the output (hook out_tile). Two-pass keeps pass 1's tiles in a call-wide
 *     store of fixed size when they fit, else recomputes them (same bits); its decode splits
 *     keys and merges statistics, then outputs, in order. Materialised keeps them per worker
 *     and prepacks K/V.
 *
 * Hooks are called once per task or per key tile, never per row or element. Every task's
 * arithmetic depends only on the shapes, never on the thread count.
 */
#ifndef MH_CORE_DRIVER_H
#define MH_CORE_DRIVER_H
#include "core/kv_pages.h"
#include "core/score.h"
#include "kernels/kernels.h"
#include "util/checked.h"
#include "util/workspace.h"

typedef enum { MH_DRV_ONE_PASS, MH_DRV_TWO_PASS, MH_DRV_MATERIALISED } mh_drv_mode;

/* One task. The driver sets the geometry; the stage's task hook sets the rest. */
typedef struct mh_drv_task {
    int b, s;                  /* batch, stream */
    size_t h0, i0, nq, rows;   /* first head, first query, queries, rows = hg * nq */
    /* set by the stage's task hook */
    int active;                /* 0: skipped (reads nothing, writes nothing); driver sets 1 */
    int64_t j_begin, j_end;    /* keys any row may keep */
    mh_score_block blk;        /* one-pass: the score step of the task's rows */
    int direct_qk, direct_pv;  /* one-pass: direct kernels instead of packed GEMMs */
    const int32_t* q_row;      /* [nq] tokens of the rows in Q and O (instead of i0 + ii), or NULL */
    const float* o_scale;      /* [nq] output multipliers (gates), or NULL */
} mh_drv_task;

/* One stream's task and key chunk in a decode across streams (driver-private). */
struct mh_drv_lane {
    mh_drv_task t;
    int64_t lo, hi;
};

/* One worker's buffers (rows = hg * tq). NULL where the mode has none. */
typedef struct mh_drv_scratch {
    float* q;     /* [rows][dqk]                the task's queries, pre-scaled */
    float* kt;    /* [tk/NR][dqk][NR]           a packed K tile (not materialised) */
    float* vt;    /* [ceil(dv/NR)][tk][NR]      a packed V tile (not materialised) */
    float* s;     /* one-pass: [rows][tk] scores, then probabilities;
                     materialised: [n_tiles][tile_floats + rows] the task's kept tiles */
    float* o;     /* [rows][dv]                 output accumulator */
    float *m, *l; /* [rows]                     softmax max and sum */
    float* alpha; /* [rows]                     softmax_tile's rescale */
    float* ones;  /* [rows]                     1.0f, a P.V rescale that keeps o (filled once per
                                                 worker, never written after) */
    float* s_prev;     /* one-pass: [rows][tk] the previous tile's probabilities, whose P.V */
    float* alpha_prev; /* [rows] and rescale run with the next tile's Q.K^T (direct kernels) */
    /* bf16 compute (st->compute): the GEMMs' bf16 operands; kt/vt then hold bf16 panels
     * (core/driver_bf16.h) */
    uint16_t* qb; /* [rows][dqk rounded up to even] the queries, rounded once per task */
    uint16_t* pb; /* one-pass: [rows][tk] a tile's probabilities, rounded per tile;
                     two-pass: [tile_floats] the stage's composed tile (DCMHA's P') */
    struct mh_drv_lane* lanes; /* [streams] one-pass decode across streams */
    /* a decode across streams on the kernels across heads (driver_heads.c); carved with the
     * lanes, else NULL */
    float* q_heads;     /* [streams][dqk] every stream's query, pre-scaled */
    float* s_heads;     /* [streams][tk]  a key tile's scores, then probabilities */
    float* acc_heads;   /* [streams][dv]  pv_heads's group sums */
    float *m_heads, *l_heads, *alpha_heads; /* [streams] softmax states and rescales */
    mh_rows* rows_heads; /* [2][streams]  every stream's K rows, then V rows, of a key tile */
    /* a decode across streams on tiles wider than attn_kv_tile, in runs (driver_across.c);
     * carved with the lanes where hg <= MH_DRV_DIRECT_MAX_ROWS, else NULL */
    float* q_runs;      /* [streams][hg][dqk] every stream's queries, pre-scaled */
    float* s_runs;      /* [streams][hg][tk]  every stream's scores, then probabilities, of a tile */
    float* alpha_runs;  /* [streams][hg]      their softmax rescales */
    size_t pack_slot;          /* the worker's slot of packed tiles, when it packs its own */
    mh_fetch fetch;            /* one-pass: rows the GEMM micro-kernels request for the driver
                                  (the next K or V tile of a decode on the packed path; rows 0:
                                  none) */
    mh_fetch ahead_k, ahead_v; /* one-pass on prepacked tiles: rows the Q.K^T and P.V GEMMs
                                  request for the worker's next steps (rows 0: none;
                                  driver.c, per_worker_heads) */
    /* two-pass modes */
    float *t1, *t2;     /* [tile_floats] the stage's score tile; pass 1's tile when unstored */
    float *mrun, *lrun; /* [rows] pass 2's running statistics when it recomputes */
    float *scale;       /* [tq][hg] a tile's exponentials-to-probabilities factors */
} mh_drv_scratch;

typedef struct mh_drv_stage mh_drv_stage;

struct mh_drv_stage {
    const mh_kernels* k;
    mh_drv_mode mode;
    const void* ctx;        /* the variant's data, handed back to every hook */
    int batch, streams, n_q, n_kv;
    size_t hg, tq, tk;      /* heads per stream, queries per full tile, keys per tile */
    size_t dqk, dv;
    float scale;            /* the final score scale */
    mh_tensor key, value;   /* K [B][M] by stream (head index = s); V by stream, or by query
                               head with v_per_head; the prepack grid's head h is K's head h
                               and V's head h, or V's heads h * hg .. h * hg + hg - 1 */
    mh_dtype k_dtype, v_dtype;
    const mh_kv_pages* pages; /* K/V in a cache's blocks (batch index = block), or NULL */
    const mh_tensor *next_key, *next_value; /* one-pass, optional: K and V of the call that
                               follows (its batch 0, head 0), requested for its pack like the
                               prepack grid's next head (driver_ahead.c); NULL: none */
    int v_per_head;
    mh_tensor_out o;        /* [B][N][H][dv] by query head */
    mh_tensor q;            /* one-pass, optional: the f32 queries [B][N][H][dqk] the stage's
                               load_q reads, which the driver then requests a task ahead
                               (per_worker_heads); data NULL: not given */
    int prepack;            /* pack K/V tiles once per call (workspace depends on M) */
    int pack_heads;         /* K/V heads per batch in the prepack grid (one-pass: streams) */
    size_t tile_floats;     /* two-pass: floats of one key tile's scores of a task */
    size_t split_count;     /* key chunks per task (mh_split_count), 1: no split */
    double flops;           /* the call's work, for the worker count */
    const mh_attn_options* opt; /* one-pass: sinks and probs [B, H, N, M] */
    mh_compute compute;     /* the precision of the GEMMs' operands: F32, or BF16 (rounded on
                               entry, f32 sums: core/driver_bf16.h) */
    int fused_norm;         /* one-pass: scale outputs by a / l (CollabHead) not a * (1/l) */

    /* Every mode. task: fills t's key range [j_begin, j_end) and, one-pass, blk, direct_qk,
     * direct_pv and the optional active, q_row, o_scale (it runs again for the merge, so it
     * must be a pure function of t's geometry). load_q: the task's queries, pre-scaled, into
     * sc->q (rows head-major); the driver then empties m, l and o. */
    void (*task)(const mh_drv_stage* st, mh_drv_task* t);
    void (*load_q)(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc);
    /* One-pass, optional: adds to the raw scores s [rows][lds] of keys [j0, j0 + nc). */
    void (*bias)(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, float* s,
                 size_t lds);
    /* Two-pass: exponentials of keys [j0, j0 + nc) into e [tile_floats], advancing m, l. */
    void (*exp_tile)(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, float* e,
                     float* m, float* l, mh_drv_scratch* sc);
    /* Two-pass: adds the tile's share of the output to sc->o, from its exponentials e
     * (relative to the per-row maxima mt) and the rows' final statistics in sc->m, sc->l. */
    void (*out_tile)(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc,
                     const float* e, const float* mt, mh_drv_scratch* sc);
};

/* Carves (or, with ws->base == NULL, measures) the workspace; returns its start. */
void* mh_drv_carve(const mh_drv_stage* st, int threads, mh_ws* ws);

/* Carves (or measures) room for the largest of the layouts of stages st[0..n), for a caller
 * that runs any of them in one workspace; returns its start. */
void* mh_drv_carve_largest(const mh_drv_stage* st, size_t n, int threads, mh_ws* ws);

/* The most K/V heads (batch x pack_heads) whose tiles a prepacking one-pass call on `threads`
 * workers packs for every head at once, before any task; from one more, each worker packs its
 * own heads as it takes them, into one slot per worker (0: always, on one worker). Fewer heads
 * can thus need more workspace than more: a workspace bound over batches looks at both. */
size_t mh_drv_grid_heads_max(int threads);

/* Runs the call in ws, what mh_drv_carve returned for the same stage shapes and threads. */
void mh_drv_run(const mh_drv_stage* st, int threads, void* ws);

/* Query tiles of the stage. */
size_t mh_drv_query_tiles(const mh_drv_stage* st);

/* Sets st->prepack for a one-pass stage whose shapes are set: K/V tiles are packed once per
 * call when several query tiles of a head would otherwise each pack the same tiles (prefill,
 * with enough rows for the GEMMs), and only when the caller sized the workspace knowing M
 * (prepack_ok). A prepacking stage's tile st->tk is then the prefill tile
 * (attn_prefill_kv_tile), or fewer keys when M is shorter (M rounded up to the decode tile
 * attn_kv_tile): a tile past M only spreads the score rows apart (N = M = 128 on a 512-key
 * tile: 1.03x the time). */
void mh_drv_plan_prepack(mh_drv_stage* st, int prepack_ok);

/* The score block and key range of task t from the options (causal, window, softcap, ALiBi,
 * mask by head h0, kv_len, q_offset), the rows at positions pos [nq] if not NULL; a helper
 * for one-pass task hooks. */
void mh_drv_block(const mh_drv_stage* st, const mh_attn_options* opt, const int64_t* pos,
                  mh_drv_task* t);

/* The prepacked K (kv = 0) or V (kv = 1) tile holding key j0 of prepack head h of batch b,
 * or NULL when the call does not prepack. Only inside the hooks of a running call (st is
 * then the driver's copy of the stage), for a head of the worker's task (sc: its scratch). */
const float* mh_drv_packed(const mh_drv_stage* st, const mh_drv_scratch* sc, int kv, size_t b, size_t h,
                           int64_t j0);

/* The rows of x (K or V, storage dtype dt) of batch b and head h from key j0, as the kernels
 * read them: rows stride_token apart and, for MH_DTYPE_I8, the scales of the same rows. With
 * pages (not NULL), x's batch index is a cache block and b's rows are found through pg
 * (core/kv_pages.h); the rows read from j0 must then lie in one block. The rows carry the
 * stage's decode prefetch rule (its kernel table's). */
mh_rows mh_drv_rows(const mh_drv_stage* st, const mh_tensor* x, const mh_kv_pages* pg, mh_dtype dt, size_t b, size_t h,
                    int64_t j0);

/* How many of the n keys from key j0 lie in j0's block: n, unless a paged cache's block ends
 * first (a tile wider than the blocks: a grouped decode's, core/attention.c). */
static inline size_t mh_drv_block_keys(const mh_drv_stage* st, int64_t j0, size_t n) {
    const mh_kv_pages* pg = st->pages;
    if (!pg || !pg->table) return n;
    const size_t left = (size_t)(pg->block_size - j0 % pg->block_size);
    return left < n ? left : n;
}

/* Decode blocks (one query per head) of up to this many rows (query heads sharing a K/V head)
 * stay on the direct kernels, in chunks: streaming K/V once beats packing it for a GEMM that
 * has too few rows to pay for the packing (the GQA family's task hook, core/attention.c). */
#define MH_DRV_DIRECT_MAX_ROWS 16

/* The length of the GEMM row block at row r when `rows` rows are split into ceil(rows / mr)
 * blocks of near-equal size, the larger first: MQA's 32 rows at MR = 6 as 6 6 5 5 5 5, not
 * 6 6 6 6 6 2, whose 2-row block does a third of a full block's FMAs per panel load (MQA decode
 * at 32K keys, Zen 5: 0.98-0.99x the time). A row's sums do not depend on its block, so
 * neither do the bits. */
static inline size_t mh_drv_block_len(size_t rows, size_t mr, size_t r) {
    const size_t n = (rows + mr - 1) / mr, base = rows / n, big = rows % n;
    return r < big * (base + 1) ? base + 1 : base;
}

/* The length of the direct kernels' chunk at row r of a task's `rows` rows, at most
 * dr = attn_direct_rows - 1 each: near-equal chunks when the table asks for them
 * (attn_direct_even_rows) and every chunk then has at least that many rows, else dr rows at a
 * time, the full chunks first. The number of chunks, so of passes over the K/V tile, is the
 * same either way, and a row's sums do not depend on its chunk (docs/kernels.md, "Decode
 * kernels": which tables ask and why). */
static inline size_t mh_drv_direct_len(const mh_kernels* k, size_t rows, size_t r) {
    const size_t dr = k->attn_direct_rows - 1, even = k->attn_direct_even_rows, n = (rows + dr - 1) / dr;
    return even && rows / n >= even ? mh_drv_block_len(rows, dr, r) : mh_min_size(dr, rows - r);
}

/* Rows far apart (a task's query rows in Q, its output rows: one token's heads lie between
 * them) are requested this many rows before they are read or written, so their misses overlap
 * instead of each waiting in turn; a row's lines go to L1, for reading (write 0) or writing. */
#define MH_DRV_ROWS_AHEAD 8
static inline void mh_drv_prefetch(const void* p, size_t bytes, int write) {
    for (size_t off = 0; off < bytes; off += 64) {
        if (write) __builtin_prefetch((const char*)p + off, 1, 3);
        else __builtin_prefetch((const char*)p + off, 0, 3);
    }
}

#endif
