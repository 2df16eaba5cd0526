/*
 * The internal interface a variant implements, and the layer object they share.
 *
 * The public entry points (src/api/layer_api.c) check everything that is common to all
 * variants (pointers, sizes, workspace size, cache compatibility) and ask the variant, through
 * the fields and hooks below, what it cannot serve, before calling it; so a variant's
 * forward/decode may trust their arguments and must not fail. src/api names no variant: it
 * reaches one only through mh_variant_lookup and these operations, and no variant names
 * another (what several share is in variant_common.c).
 */
#ifndef MH_VARIANT_H
#define MH_VARIANT_H
#include "core/attention.h"
#include "core/kv_cache.h"
#include "core/gemm.h"
#include "kernels/kernels.h"
#include "util/workspace.h"

struct mh_layer {
    mh_layer_config cfg; /* resolved: every 0-means-default field filled in; alibi_slopes and
                            sinks point at the layer's own copies below. A shard's: its heads
                            (n_heads, n_kv_heads, slopes and sinks of its heads) */
    mh_layer_config full; /* the full layer's (= cfg unless sharded; its alibi/sinks unset) */
    mh_shard_info shard;  /* the heads of the full layer this one holds (variants/shard.h) */
    const struct mh_variant_ops* ops;
    const mh_kernels* kernels;
    int threads;
    mh_packed_matrix wq; /* [H*D,    d_model] packed */
    mh_packed_matrix wk; /* [Hkv*D,  kdim]    packed */
    mh_packed_matrix wv; /* [Hkv*Dv, vdim]    packed */
    mh_packed_matrix wo; /* [d_model, H*Dv]   packed */
    float* alibi;        /* [H] or NULL */
    float* sinks;        /* [H] or NULL */
    float* inv_freq;     /* [rotary_dim / 2] rotary inverse frequencies, or NULL = no rotary;
                            cfg.rotary.inv_freq points here (variants/positions.h) */
    float* q_norm;       /* [D] QK-norm weights of q, or NULL = no QK-norm */
    float* k_norm;       /* [D] of k */
    void* vcfg;          /* the variant's resolved config (ops->config_size bytes: its
                            mh_<variant>_config), or NULL; cfg.variant_config points here */
    void* ext;           /* the variant's own state (router, mixing, ...), or NULL */
    size_t ext_bytes;    /* bytes of weights held in ext, for mh_layer_weights_bytes */
};

/* What a variant serves beyond the common calls (mh_variant_ops.caps). */
enum {
    MH_CAP_ROUTING = 1,   /* fills a mh_routing_record (forward and decode) */
    MH_CAP_QK_NO_BIAS = 2, /* b_q and b_k stay NULL even with config.bias (shared Q/K) */
    MH_CAP_I8_CACHE = 4,   /* its decode reads an MH_DTYPE_I8 cache (plain per-head K/V rows) */
    MH_CAP_POSITIONS = 8,  /* takes rotary and QK-norm (variants/positions.h) */
    MH_CAP_SEQS = 16,      /* its decode serves ragged calls (any ids, counts and lengths) and
                              paged caches; without it, only sequences 0 .. B-1 advancing
                              together (equal lengths and counts) in a contiguous cache */
    MH_CAP_SHARD = 32      /* head-sharded layers (variants/shard.h): heads do not mix */
};

typedef struct mh_variant_ops {
    const char* name;
    size_t config_size;         /* bytes of its mh_<variant>_config (tag first); 0 = none */
    const void* config_default; /* that config's defaults (tag set); NULL when none */
    int has_weights;            /* 1: it reads a mh_<variant>_weights (tag first) */
    unsigned caps;              /* MH_CAP_* */
    /* Fills the variant's defaults into cfg and its own config `vcfg` (= cfg->variant_config,
     * config_size bytes, writable) and checks their rules. Runs after the common defaults
     * (head_dim_v, kdim, vdim: mh_variant_resolve) and before the default scale. */
    mh_status (*resolve_config)(mh_layer_config* cfg, void* vcfg);
    /* What the variant cannot serve of a forward call that passed the common checks
     * (MH_ERR_UNSUPPORTED, ...), or MH_OK; NULL = it serves every such call. */
    mh_status (*check_forward)(const mh_layer* layer, const mh_forward_args* args);
    /* Packs the weights into `layer` (cfg, kernels and threads are already set). On error it
     * leaves nothing allocated. */
    mh_status (*create)(mh_layer* layer, const mh_layer_weights* w);
    void (*destroy)(mh_layer* layer);
    /* What the layer's KV cache holds per token (core/kv_cache.h). */
    void (*cache_layout)(const mh_layer* layer, mh_cache_layout* out);
    /* Carve (or measure, with ws->base == NULL) the forward / decode workspace. */
    void (*forward_carve)(const mh_layer* layer, int batch, int n_q, int n_kv, mh_ws* ws);
    void (*decode_carve)(const mh_layer* layer, int batch, int n_new, mh_ws* ws);
    /* Run on validated arguments with a workspace of the carved size. */
    void (*forward)(const mh_layer* layer, const mh_forward_args* args, void* workspace);
    /* Writes each named sequence's new tokens at its length and attends over them and
     * everything before; it never changes the lengths (the public entry reserves the blocks
     * before and advances the lengths after). */
    void (*decode)(const mh_layer* layer, struct mh_kv_cache* cache, const mh_decode_args* args,
                   void* workspace);
} mh_variant_ops;

/* Helpers every variant shares (variants/variant_common.c). */
/* The whole config resolution of a layer of variant `ops`: checks the tags of
 * cfg->variant_config and (w not NULL) w->variant_weights, copies the variant config (or its
 * defaults) into vcfg (ops->config_size bytes; NULL when 0) and points cfg->variant_config
 * there, fills the common defaults (head_dim_v = D, kdim = vdim = d_model), runs
 * ops->resolve_config, then the default scale 1/sqrt(D), then the positions (rotary, QK-norm:
 * variants/positions.h). */
mh_status mh_variant_resolve(const mh_variant_ops* ops, mh_layer_config* cfg,
                             const mh_layer_weights* w, void* vcfg);
/* The GQA family's KV heads: n_kv_heads 0 becomes `dflt`, and H must be a multiple of it. */
mh_status mh_variant_resolve_kv_heads(mh_layer_config* cfg, int dflt);
/* The GQA family's cache: one K stream of D and one V stream of Dv per KV head. */
void mh_variant_kv_heads_layout(const mh_layer* L, mh_cache_layout* out);
/* The sequences a decode call names (mh_kv_seqs of its args). */
mh_kv_seqs mh_variant_decode_seqs(const mh_decode_args* a);

/* What a ragged decode (MH_CAP_SEQS) adds to its workspace, for up to B sequences of n rows:
 *   rows [B*n, d_model]  the padded input rows, later the padded output rows (used only when
 *                        some count is below n: the public rows are packed)
 *   kv_len [B]  q_pos [B*n]  the call's key counts and query positions */
typedef struct mh_decode_bufs {
    float* rows;
    int32_t* kv_len;
    int64_t* q_pos;
} mh_decode_bufs;
void mh_variant_decode_carve(const mh_layer* L, int B, int n, mh_ws* ws, mh_decode_bufs* d);
/* The input rows in the padded layout [B][n][d_model]: x itself when every count is n, else
 * d->rows with x's packed rows spread out and the filler rows zero. */
const float* mh_variant_rows_in(const mh_layer* L, const mh_kv_seqs* s, const float* x, const mh_decode_bufs* d);
/* Where the padded output rows go: out itself when every count is n, else d->rows; then
 * mh_variant_rows_out packs them into out (a no-op in the first case). */
float* mh_variant_rows_at(const mh_kv_seqs* s, float* out, const mh_decode_bufs* d);
void mh_variant_rows_out(const mh_layer* L, const mh_kv_seqs* s, const float* padded, float* out);
/* The call's positions, from the lengths before it (they change only after the variant's
 * decode): d->kv_len [B] and d->q_pos [B*n], the cache position of every padded row's token
 * (core/kv_cache.h: mh_kv_cache_positions). Returns the longest kv_len. */
int mh_variant_decode_positions(const struct mh_kv_cache* cache, const mh_kv_seqs* s, const mh_decode_bufs* d);
/* Points p (queries already set, [B][n] rows) at the cache for the call: K/V views, dtypes,
 * n_kv (from mh_variant_decode_positions); and sets opt (causal, kv_len) and ex (q_pos when
 * counts differ, the block map) so batch row b attends over its own sequence with its queries
 * at their cache positions. pages is the storage ex may point at. */
void mh_variant_decode_view(const struct mh_kv_cache* cache, const mh_kv_seqs* s, const mh_decode_bufs* d, int n_kv,
                            mh_attn_problem* p, mh_attn_options* opt, mh_core_extra* ex, mh_kv_pages* pages);
/* Packs W [n_out, k_in] and bias [n_out] (may be NULL) for the layer's GEMMs, in its compute
 * mode (bf16 layers project in bf16: docs/api.md "Compute modes"). */
mh_status mh_variant_pack(const mh_layer* L, const float* w, const float* bias, int n_out, int k_in,
                          mh_packed_matrix* out);
/* Frees wq, wk, wv and wo (a zeroed matrix is fine). */
void mh_variant_free_projections(mh_layer* L);
/* The layer's model-level options (window, soft-cap, ALiBi, sinks) over a call's per-call
 * ones (call may be NULL: the defaults). */
mh_attn_options mh_variant_options(const mh_layer* L, const mh_attn_options* call);
/* out [rows, d_model] = o [rows, wo.k_in] Wo^T + bo: the output projection. */
void mh_variant_out_projection(const mh_layer* L, size_t rows, const float* o, float* out);

/* The module serving `v`, or NULL for an unknown variant (variants/registry.c). */
const mh_variant_ops* mh_variant_lookup(mh_variant v);

#endif
