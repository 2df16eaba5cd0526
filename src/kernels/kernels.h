/*
 * The kernel table: every ISA-specific routine the core calls, reached only through this
 * struct. Every ISA implements every slot (kernel_list.h); its table_<name>.c adds the sizes.
 * docs/kernels.md is the written contract; the short form is above the struct.
 *
 * Common rules: sizes are element counts; leading dimensions (ld*) are in elements; kernels
 * handle every tail themselves and never read or write outside the described extents; no
 * kernel allocates; a row's result depends only on that row's inputs, in a fixed order.
 */
#ifndef MH_KERNELS_H
#define MH_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/fetch.h"
#include "kernels/kernel_list.h"
#include "multihead.h"

/* Largest rank a head-mix kernel takes (its register/stack blocking is sized by it). A
 * variant whose own rank bound is larger cannot use these kernels. */
#define MH_HEAD_MIX_MAX_RANK 8

/* The most rows a GEMM micro-tile has on any ISA (gemm_mr, gemm_mr_bf16: AMX's 32): buffers
 * of whole micro-tiles of rows (the bf16 projections' rounded rows, core/gemm.c) hold at least
 * this many. */
#define MH_GEMM_MR_MAX 32

/* Keys per group of pv_direct's two-level sum (the contract below). The pipelined decode's
 * turns and the int8 P.V's chunks are multiples of it, so every caller's split of a tile gives
 * the same bits. */
#define MH_PV_GROUP 16

/* The end of pv_direct's group of keys starting at key c of a call over cols keys. */
static inline size_t mh_pv_group_end(size_t c, size_t cols) { return cols - c < MH_PV_GROUP ? cols : c + MH_PV_GROUP; }

/* The factors of one cross-head mix (DCMHA's composition) over a group of g heads,
 * rank <= MH_HEAD_MIX_MAX_RANK, for one query row and a run of keys (key-side factors
 * key-contiguous, rows ldk apart):
 *   a'[m][c] = a[m * lda + c] * (ascale ? ascale[m] : 1)
 *   out[n * ldo + c] = a'[n][c] * ((1 + qdd[n]) + kdd[n * ldk + c])
 *       + sum_r qw2[r * g + n] * (sum_m qw1[r * g + m] * a'[m][c])
 *       + sum_r kw2[(r * g + n) * ldk + c] * (sum_m kw1[(r * g + m) * ldk + c] * a'[m][c])
 *       + (wb ? sum_m wb[m * g + n] * a'[m][c] : 0)
 * for n < g, c < cols (sums over m ascending, then r ascending; terms added in this order). */
typedef struct mh_head_mix_factors {
    size_t g, rank;
    const float *qw1, *qw2, *qdd; /* the query's [R][g], [R][g], [g] */
    const float* wb;              /* static [g][g] (in head m, out head n), or NULL */
    const float *kw1, *kw2, *kdd; /* the keys' [R][g][ldk], [R][g][ldk], [g][ldk] */
    size_t ldk;
} mh_head_mix_factors;

/* What the rope kernel does to each head of a projected q or k row (layers' positions,
 * include/multihead.h "positions"): QK-norm when norm is set, then rotary on the first rot
 * dims (none when rot is 0). */
typedef struct mh_rope_args {
    size_t heads, d;       /* heads per row, each d wide, head h at h * d */
    size_t rot;            /* rotated dims r: even, <= d; 0 = no rotary */
    int interleaved;       /* 1: pairs (2i, 2i + 1); 0: rotate-half pairs (i, i + r/2) */
    const float* inv_freq; /* [r/2] */
    const float* norm;     /* [d] QK-norm weights, or NULL = no norm */
    float eps;             /* QK-norm epsilon */
} mh_rope_args;

/* How the decode kernels prefetch near (contiguous) K/V rows in software
 * (kernels/decode_prefetch.h), a property of the CPU's prefetchers (mh_cpu_decode_prefetch): */
typedef enum mh_prefetch_rule {
    MH_PREFETCH_L2 = 0, /* grouped heads' rows (3+ query rows per K/V row), 48 keys ahead into
                           L2: AMD Zen 4 and CPUs the library does not know */
    MH_PREFETCH_L1 = 1, /* grouped heads' rows 16 keys ahead into L1: AMD Zen 5 */
    MH_PREFETCH_ALL = 2, /* every stream's, lone ones too, 48 keys ahead into L2: Intel, whose
                            L2 streamer stops at every 4 KiB page */
    MH_PREFETCH_TURN = 3 /* as L2, except in a pipelined decode's turns of MH_TURN_PREFETCH_BYTES
                            or more: each kernel then prefetches the other stream's next turn
                            (mh_rows.next), every stream's, into L2; and a decode across
                            streams on a dense token-major cache requests the next key tile
                            in address order (core/driver_across.c, region_prefetch): AMD Zen 3 */
} mh_prefetch_rule;

/* Which MHA decodes on far-apart K/V rows (an engine's token-major cache) run on the kernels
 * across heads, key by key through every head, rather than on per-head tiles
 * (core/driver_heads.c), a property of the CPU's prefetchers (mh_cpu_decode_heads): */
typedef enum mh_heads_rule {
    MH_HEADS_L1 = 0, /* those whose heads' query and score rows fit 5/8 of the L1: AMD Zen 5,
                        and the CPUs where the rule is not measured */
    MH_HEADS_ANY = 1 /* every one: AMD Zen 3, whose per-head tiles read far rows slower than
                        the kernels across heads at any head count measured (32 to 128) */
} mh_heads_rule;

/* Rows of a K or V tile as the kernels read them: row c (0 <= c < cols) holds its elements
 * at data + c * ld (elements of dtype); an MH_DTYPE_I8 row's values are
 * scale[c * ld_scale] * (int8_t)q. */
typedef struct mh_rows {
    const void* data;
    ptrdiff_t ld;        /* elements between rows */
    mh_dtype dtype;
    const float* scale;  /* [cols] row scales, ld_scale apart (MH_DTYPE_I8 only, else NULL) */
    ptrdiff_t ld_scale;
    int interleaved;     /* 1: one of several row sets the caller reads in turn, tile by tile
                            (CollabHead's per-head V): the decode kernels prefetch it
                            (kernels/decode_prefetch.h); 0: read alone */
    const void* next;    /* the first row of a set the caller reads later (same dtype and
                            row length, next_ld apart), whose row c the kernels prefetch while
                            reading row c here. Far-apart rows: in a token-major decode, the
                            tile MH_FAR_PREFETCH_STREAMS heads on, or on a dense cache a run of
                            the next key tile's bytes (NULL: row c + one key tile of this set).
                            Near rows: under MH_PREFETCH_TURN, the other stream's next turn in
                            a pipelined decode (NULL: the rule's usual prefetch) */
    ptrdiff_t next_ld;   /* elements between next's rows; 0: ld */
    mh_prefetch_rule prefetch; /* the table's decode_prefetch, set by the driver */
} mh_rows;

/*
 * The slots (generated from kernel_list.h; contracts):
 *
 * ---- GEMM micro-kernels on packed panels: used by the projections (weights packed at
 * create), by Q.K^T (K tile packed per task) and by P.V (V tile packed per task).
 * A panel holds NR = gemm_nr columns of B as [k][NR], zero-padded past the last column;
 * the kernels may read all NR columns of a panel row but write only n <= NR. m <= MR.
 *   gemm:     c[r * ldc + j] = sum_kk a[r * lda + kk] * panel[kk * NR + j] + (bias ? bias[j] : 0)
 *   gemm_acc: c[r * ldc + j] = alpha[r] * c[r * ldc + j] + sum_kk a[r * lda + kk] * panel[kk * NR + j]
 *   fetch (NULL: none): lines the kernel requests (prefetches) for its caller as it goes,
 *   one every MH_FETCH_EVERY values of kk (every value under MH_FETCH_DENSE; the bf16 kernels:
 *   one per k-pair, dense or not), advancing *fetch (kernels/fetch.h); the results do not depend on it.
 *
 * ---- packing K/V tiles (mh_rows of any storage dtype) into f32 panels of gemm_nr columns;
 * values are widened exactly, int8 ones then multiplied by their row's scale (scale * q).
 *   pack_kt: Q.K^T operand: panel p holds keys [p*NR, p*NR + NR): dst[(p * d + dd) * NR + j] =
 *            K[p*NR + j][dd]; keys past `cols` are zero.
 *   pack_v:  P.V operand: panel p holds V columns [p*NR, p*NR + NR): dst[(p * cols + c) * NR + j] =
 *            V[c][p*NR + j]; columns past dv are zero.
 *
 * ---- direct kernels for few query rows (decode): read K/V rows in place, no packing;
 * rows < attn_direct_rows. For int8 rows (scale_c = the row's scale):
 *   qk_direct: s[r * lds + c] = scale_c * sum_dd q[r * ldq + dd] * K[c][dd]
 *              (the dot on the int8 values, then times scale_c; other dtypes: no scale)
 *   pv_direct: o[r * ldo + :] = alpha[r] * o[r * ldo + :] + sum_c (p[r * ldp + c] * scale_c) * V[c][:]
 *              (p times the scale first), the sum in groups of MH_PV_GROUP keys from c = 0:
 *              each group's terms summed from -0 in key order, then o = alpha * o + sum for
 *              the first group (o = alpha * o with no key), o = o + sum for the later ones.
 *              Two levels instead of one sum into o keep a long decode's error down (32K
 *              keys: rel-L2 3e-7 against 1.1e-6), and a call's result is that of its keys
 *              split at any multiple of MH_PV_GROUP into calls (the later ones with alpha 1).
 *
 * ---- direct kernels across heads (decode on an engine's token-major cache, one query row per
 * head): k[h] / v[h] are head h's rows (mh_rows each); the kernels read key c of every head
 * before key c + 1 of any, which on a token-major cache is address order.
 *   qk_heads: s[h * lds + c] = head h's score of key c, bitwise qk_direct(1, ..., q + h * ldq,
 *             ldq, &k[h], ...) for every h < heads, c < cols.
 *   pv_heads: o[h * ldo + :] = bitwise pv_direct(1, cols, dv, p + h * ldp, ldp, &v[h], alpha + h,
 *             o + h * ldo, ldo) for every h < heads; acc [heads][dv] is the caller's scratch
 *             for the groups' sums (its contents on entry and exit mean nothing).
 *
 * ---- scale_row: y[i] = x[i] * a for i < n (y may be x): the driver's query pre-scale and
 *   output normalisation.
 *
 * ---- add_row: y[i] = y[i] + x[i] for i < n (x and y do not overlap): MoH's gathered heads'
 *   output projections added into their tokens' rows.
 *
 * ---- v_nonfinite: 1 if an element [c][d] of v with c in [c_lo, c_hi), d in [d_lo, d_hi) is
 *   NaN or infinite (int8: if a row's scale is), else 0. The driver's P.V asks it before rows
 *   keeping different key counts share one call (a dropped key's 0 * inf would be NaN).
 *
 * ---- online softmax over a score tile (-INFINITY = dropped key). Per row r:
 *   m_new = max(m[r], max_c s); if m_new = -inf: s[r, :] = 0, alpha[r] = 1, m/l unchanged;
 *   else alpha[r] = exp(m[r] - m_new), s[r, c] = exp(s[r, c] - m_new),
 *        l[r] = l[r] * alpha[r] + sum_c s[r, c], m[r] = m_new.
 *
 * ---- head_mix: cross-head mix of one query row (DCMHA's composition, docs/variants.md
 * "DCMHA"): see mh_head_mix_factors. out must not overlap a.
 *
 * ---- rope: per row r (x + r * ldx) and head (d wide), in this order:
 *   if a->norm: x[j] = (x[j] * (1 / sqrt(sum_j x[j]^2 / d + eps))) * norm[j]   (f32)
 *   if a->rot:  pair i < rot/2 turns by angle fl32((float)pos[r] * inv_freq[i]):
 *               (x, y) -> (x*cos - y*sin, x*sin + y*cos), every product rounded to f32 (no fma,
 *               as PyTorch's q*cos + rotate_half(q)*sin); cos/sin are SLEEF's 1-ulp sincosf,
 *               computed once per row and shared by its heads. Dims past rot pass.
 *
 * ---- bf16 compute (MH_KERNEL_LIST_BF16; NULL on ISAs without them). Operands are bf16 and
 * products accumulate in f32. A bf16 panel of NR columns holds k-pairs: element (kk, j) at
 * panel[((kk / 2) * NR + j) * 2 + kk % 2]; A rows hold bf16 values, lda even, and are read
 * two at a time (element k of a row with odd k must be readable; it is ignored, and so is the
 * panel's second element of the last pair). m <= MR.
 *   gemm_bf16:     c[r * ldc + j] = sum_kk a[r * lda + kk] * panel(kk, j)
 *   gemm_acc_bf16: c[r * ldc + j] = alpha[r] * c[r * ldc + j] + sum_kk a[r * lda + kk] * panel(kk, j)
 *   pack_kt_bf16:  K tile as pack_kt, in bf16 pairs over d: panel p holds keys [p*NR, p*NR + NR)
 *                  as [ceil(d/2)][NR][2]; keys past cols and the pad of an odd d are zero.
 *   pack_v_bf16:   V tile as pack_v, in bf16 pairs over keys: panel p holds V columns
 *                  [p*NR, p*NR + NR) as [ceil(cols/2)][NR][2]; columns past dv and the pad key
 *                  of an odd cols are zero.
 *   rows_bf16:     dst[c * width + e] = row c's element e (c < cols, e < width) in bf16: a K or
 *                  V tile row-major, for the direct kernels of a bf16 decode (core/driver_bf16.h).
 *   The packs and rows_bf16 round the value the storage represents (int8: scale * q in f32) to
 *   bf16, nearest even; bf16 storage is copied as it is.
 *   round_bf16:    y[i] = x[i] rounded to bf16 for Q's and P's rows and projection inputs,
 *                  bitwise f32_to_bf16 (nearest even; a subnormal rounded, never flushed; a
 *                  NaN keeps its top bits with the quiet bit set); a slot of its own because
 *                  it runs only where the CPU has the extension, so it may use the
 *                  extension's conversion.
 *   softmax_tile_bf16: softmax_tile, and each P row's cols probabilities also rounded to bf16
 *                  as round_bf16 rounds them, into pb (rows lds apart, as s's).
 *
 * ---- f32_to_f16 / f32_to_bf16: storage conversions (round to nearest even).
 * ---- f32_to_i8: one row of n floats to symmetric int8: *scale = max|x| / 127 (f32
 *   division), q[i] = x[i] / *scale (f32 division) rounded to nearest even, clamped to
 *   [-127, 127]. A row whose max|x| / 127 is 0 (all zero, or only the tiniest subnormals)
 *   gets scale 0 and q 0; a row holding a NaN or an infinity
 *   gets scale NaN and q 0, so every value of it reads back as NaN (never a finite lie).
 */
typedef struct mh_kernels {
    mh_isa isa;
#define MH_KERNEL_MEMBER(slot, ret, params) ret(*slot) params;
    MH_KERNEL_LIST(MH_KERNEL_MEMBER)
    MH_KERNEL_LIST_BF16(MH_KERNEL_MEMBER) /* NULL where the ISA has no bf16 kernels */
#undef MH_KERNEL_MEMBER

    /* GEMM micro-tile: rows (MR <= MH_GEMM_MR_MAX) and panel columns (NR); the rows the bf16
     * GEMM slots take at most (gemm_mr, or AMX's 32: the blocks the callers should hand them). */
    size_t gemm_mr;
    size_t gemm_nr;
    size_t gemm_mr_bf16;
    /* Where the bf16 GEMMs can run on AMX tiles (mh_cpu_bf16_gemm): puts them in gemm_bf16,
     * gemm_acc_bf16 and gemm_mr_bf16, which hold the other bf16 GEMMs until the process's
     * first bf16 call (mh_dispatch_bf16_ready); NULL elsewhere. */
    void (*bf16_amx)(struct mh_kernels* k);
    /* What the bf16 GEMMs multiply on (mh_compute_kernels): "amx", "dot" (a bf16 dot-product
     * instruction: the default where gemm_bf16 is set), "fma" (f32 FMAs on widened bf16) or
     * "f32" (the scalar ISA's). */
    const char* bf16_gemm_name;
    /* Query blocks with fewer rows than this use the direct kernels. */
    size_t attn_direct_rows;
    /* A larger block runs them in chunks of attn_direct_rows - 1 rows, the full chunks first
     * (0), or near-equal chunks when each then has at least this many rows (the driver's
     * mh_drv_direct_len). */
    size_t attn_direct_even_rows;
    /* Attention tiling: query rows per task block (across the heads of a group) and keys per
     * KV tile (a multiple of gemm_nr; a paged cache's block size is a multiple of it), and per
     * KV tile of a call that packs K/V once for all its query tiles (prefill: a multiple of
     * attn_kv_tile; wider tiles spread the softmax's per-row work over more keys). */
    size_t attn_block_rows;
    size_t attn_kv_tile;
    size_t attn_prefill_kv_tile;
    /* Keys per KV tile of a decode of attn_direct_rows or more query rows per K/V head (MQA,
     * GQA groups; core/attention.c) in f32 compute: a multiple of attn_kv_tile, wider for the
     * same reason as prefill's (the dispatcher sets attn_kv_tile where the init leaves it 0). */
    size_t attn_group_kv_tile;
    /* The x86 decode kernels' prefetch of near rows on this CPU (mh_rows.prefetch,
     * mh_cpu_decode_prefetch); the other ISAs' kernels issue none. */
    mh_prefetch_rule decode_prefetch;
    /* The CPU's L1 data cache in bytes (mh_cpu_l1d_bytes) and its rule for the decode's
     * order on far rows (mh_cpu_decode_heads): under MH_HEADS_L1, whether the decode's query
     * and score rows stay in the L1 beside a stream decides that order (core/driver_heads.c). */
    size_t l1d_bytes;
    mh_heads_rule decode_heads;
    /* A core's L2 in bytes (mh_cpu_l2_bytes): what a decode across streams may prefetch a key
     * tile ahead (core/driver_across.c, "region_ahead"). */
    size_t l2_bytes;
} mh_kernels;

/* Rows of the GEMM blocks a caller computing in `compute` hands the table's GEMMs. */
static inline size_t mh_kernels_gemm_mr(const mh_kernels* k, mh_compute compute) {
    return compute == MH_COMPUTE_BF16 ? k->gemm_mr_bf16 : k->gemm_mr;
}

#endif
