/*
 * multihead: attention layers for CPUs.
 *
 * The one public header. Everything here is C11 and usable from C++.
 *
 * Conventions (docs/api.md has the long form):
 *  - Every function that can fail returns mh_status; MH_OK is 0.
 *  - On any error no output, cache or workspace the caller can observe is written.
 *  - Sizes are `int` and must be >= 1 unless stated; strides are in ELEMENTS, not bytes.
 *  - The last dimension of every tensor is contiguous (element stride 1).
 *  - Weights use the PyTorch nn.Linear layout: W[out_features, in_features], row-major.
 *  - Create functions may allocate; forward, decode and mh_attention never allocate.
 */
#ifndef MULTIHEAD_H
#define MULTIHEAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ version */
#define MH_VERSION_MAJOR 0
#define MH_VERSION_MINOR 5
#define MH_VERSION_PATCH 0
#define MH_VERSION_NUMBER (MH_VERSION_MAJOR * 10000 + MH_VERSION_MINOR * 100 + MH_VERSION_PATCH)

/* The linkage of every public function. Define MH_API yourself to override it; on Windows,
 * define MH_STATIC when linking the static library (the DLL's functions are dllimport
 * otherwise). The library's own build defines MH_BUILDING_LIBRARY. */
#ifndef MH_API
#if defined(_WIN32) && defined(MH_BUILDING_LIBRARY)
#define MH_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(MH_STATIC)
#define MH_API __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#define MH_API __attribute__((visibility("default")))
#else
#define MH_API
#endif
#endif

/* MH_VERSION_NUMBER of the library actually linked. */
MH_API unsigned mh_version_number(void);
/* "MAJOR.MINOR.PATCH" of the library actually linked; static storage. */
MH_API const char* mh_version_string(void);

/* ------------------------------------------------------------------ status */
/* Values are stable: they never change meaning between versions. */
typedef enum mh_status {
    MH_OK = 0,
    MH_ERR_INVALID_ARGUMENT = 1,  /* NULL pointer, size <= 0, bad enum, inconsistent config */
    MH_ERR_UNSUPPORTED = 2,       /* valid request this build cannot serve */
    MH_ERR_OUT_OF_MEMORY = 3,     /* an allocation in a create function failed */
    MH_ERR_SIZE_OVERFLOW = 4,     /* a size product does not fit in size_t / ptrdiff_t */
    MH_ERR_WORKSPACE_TOO_SMALL = 5,
    MH_ERR_CACHE_FULL = 6,        /* the KV cache has no room for the new tokens */
    MH_ERR_SHAPE_MISMATCH = 7,    /* e.g. a KV cache of another batch size or layer shape */
    MH_ERR_ISA_UNAVAILABLE = 8    /* forced ISA not compiled in or not on this CPU */
} mh_status;

/* A short English description; never NULL, static storage. */
MH_API const char* mh_status_string(mh_status status);

/* ------------------------------------------------------------------ ISAs */
typedef enum mh_isa {
    MH_ISA_AUTO = 0,   /* in a context config: MH_ISA from the environment (unset or "auto":
                          the best supported ISA) */
    MH_ISA_SCALAR = 1,
    MH_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
    MH_ISA_AVX512 = 3, /* AVX-512 F/BW/DQ/VL */
    MH_ISA_NEON = 4,
    MH_ISA_SVE = 5
} mh_isa;
#define MH_ISA_COUNT 6

/* "scalar", "avx2", ...; "auto" for MH_ISA_AUTO; "unknown" otherwise. */
MH_API const char* mh_isa_name(mh_isa isa);
/* 1 if kernels for `isa` are compiled into this library. */
MH_API int mh_isa_compiled(mh_isa isa);
/* 1 if `isa` is compiled in AND this CPU (and OS) can run it. */
MH_API int mh_isa_supported(mh_isa isa);
/* The ISA a context with MH_ISA_AUTO gets: the MH_ISA environment variable if set, else the
 * best supported one. MH_ERR_ISA_UNAVAILABLE if MH_ISA names an ISA that is not supported,
 * MH_ERR_INVALID_ARGUMENT if it names no ISA at all. */
MH_API mh_status mh_isa_default(mh_isa* out);

/* ------------------------------------------------------------------ compute modes */
/*
 * The precision the two GEMMs of attention (Q.K^T and P.V) and, in a layer, its projections
 * compute in. F32 is exact to fp32. BF16 and F16 round Q, K, V and P (and a layer's weights,
 * once at create, and the projections' input rows) to that format on entry to the GEMMs;
 * products accumulate in f32, biases, softmax and the outputs stay f32 (expect a relative L2
 * error of about 3e-3 for BF16 attention against the double oracle, 5e-3 for a layer). A compute mode is a sub-feature of an ISA: its kernels need the
 * ISA's extension (BF16: AVX512-BF16 with MH_ISA_AVX512, Arm BF16 with MH_ISA_NEON / SVE;
 * F16: AVX512-FP16, Arm FP16 FMLA). A mode the context's ISA cannot run on this CPU is refused
 * with MH_ERR_ISA_UNAVAILABLE, never run in another precision. docs/api.md, "Compute modes".
 */
typedef enum mh_compute {
    MH_COMPUTE_DEFAULT = 0, /* in a layer config or options: the context's; in a context
                               config: MH_COMPUTE from the environment, else F32 */
    MH_COMPUTE_F32 = 1,
    MH_COMPUTE_BF16 = 2,
    MH_COMPUTE_F16 = 3
} mh_compute;
#define MH_COMPUTE_COUNT 4

/* "f32", "bf16", "f16"; "default" for MH_COMPUTE_DEFAULT; "unknown" otherwise. */
MH_API const char* mh_compute_name(mh_compute compute);
/* 1 if `isa` is supported and runs `compute` on this CPU (and OS); F32 on every supported ISA. */
MH_API int mh_compute_supported(mh_isa isa, mh_compute compute);
/* What runs `compute`'s multiplications on `isa` here, for reports: "amx" (AMX-BF16 tiles,
 * TDPBF16PS), "dot" (VDPBF16PS, BFDOT, BFMMLA), "fma" (f32 FMAs, on bf16 widened in
 * registers) or "f32" (the ISA's f32 arithmetic: F32, and the scalar ISA's BF16); NULL where
 * mh_compute_supported says 0. Asking about BF16 on an ISA that can use AMX readies it as a
 * BF16 call would (the process's tile permission: docs/api.md, "Compute modes"). */
MH_API const char* mh_compute_kernels(mh_isa isa, mh_compute compute);

/* ------------------------------------------------------------------ context */
typedef struct mh_context mh_context;

/* The largest thread count a context accepts (num_threads above it: MH_ERR_INVALID_ARGUMENT).
 * It bounds every workspace, which holds per-thread scratch. */
#define MH_MAX_THREADS 1024

typedef struct mh_context_config {
    /* Worker threads per call, 1..MH_MAX_THREADS; 1 = the caller only; 0 = the OpenMP
     * runtime's setting at mh_context_create (omp_get_max_threads(): OMP_NUM_THREADS or
     * omp_set_num_threads, else all processors), capped at MH_MAX_THREADS. */
    int num_threads;
    mh_isa isa;      /* MH_ISA_AUTO, or a forced ISA (an error if unsupported, never a fallback) */
    mh_compute compute; /* the default compute mode of layers and calls on this context
                           (MH_COMPUTE_DEFAULT: the environment's MH_COMPUTE, else F32);
                           MH_ERR_ISA_UNAVAILABLE if the ISA cannot run it */
} mh_context_config;

MH_API mh_context_config mh_context_config_default(void);
MH_API mh_status mh_context_create(const mh_context_config* config, mh_context** out);
MH_API void mh_context_destroy(mh_context* ctx); /* accepts NULL */
MH_API mh_isa mh_context_isa(const mh_context* ctx);
MH_API int mh_context_num_threads(const mh_context* ctx);
MH_API mh_compute mh_context_compute(const mh_context* ctx); /* resolved: never DEFAULT */

/* ------------------------------------------------------------------ tensors */
typedef enum mh_dtype {
    MH_DTYPE_F32 = 0,
    MH_DTYPE_F16 = 1, /* IEEE binary16 */
    MH_DTYPE_BF16 = 2,
    /* Symmetric int8 K/V: element value = scale * (int8_t)q, with one f32 scale per
     * (batch, token, head) row in the view's `scale` (below). A KV cache of this dtype
     * quantises each row when it is appended: scale = max|x| / 127, q = round(x / scale) to
     * nearest even in [-127, 127]; an all-zero row has scale 0, a row with a NaN or an inf
     * scale NaN. Caches: MHA/GQA/MQA, MoH, overlapping heads (others MH_ERR_UNSUPPORTED). */
    MH_DTYPE_I8 = 3
} mh_dtype;

/* A strided 4-D view [batch, token, head, dim]; dim is contiguous. Strides in elements.
 * MH_DTYPE_I8 views also give their rows' scales: scale[b * scale_stride_batch +
 * t * scale_stride_token + h * scale_stride_head] is row (b, t, h)'s f32 scale (scale
 * non-NULL, scale strides >= 0; a 0 stride shares a scale along that dimension). Other dtypes
 * leave scale NULL (the scale fields are then not read). Prefer designated initialisers,
 * (mh_tensor){.data = p, .stride_token = ...}, which zero the fields not named. */
typedef struct mh_tensor {
    const void* data;
    ptrdiff_t stride_batch;
    ptrdiff_t stride_token;
    ptrdiff_t stride_head;
    const float* scale;            /* [B, tokens, heads] row scales (MH_DTYPE_I8 only) */
    ptrdiff_t scale_stride_batch;  /* strides of scale, in floats */
    ptrdiff_t scale_stride_token;
    ptrdiff_t scale_stride_head;
} mh_tensor;

/* The same view of an f32 output, written. */
typedef struct mh_tensor_out {
    float* data;
    ptrdiff_t stride_batch;
    ptrdiff_t stride_token;
    ptrdiff_t stride_head;
} mh_tensor_out;

/* ------------------------------------------------------------------ masks and score options */
/*
 * Scores are built in this order, for query i (absolute position p) and key j:
 *   s  = scale * dot(q_i, k_j)
 *   s  = softcap * tanh(s / softcap)            if softcap > 0
 *   s += alibi_slopes[h] * (j - p)              if alibi_slopes
 *   s += mask[b, h, i, j]                       if mask (may hold -INFINITY)
 *   key j is dropped if j >= kv_len[b], or causal and j > p, or window > 0 and p - j >= window
 *   (and, when not causal, j - p >= window)
 *   softmax over the kept keys plus, if sinks, one extra logit sinks[h] with no value.
 * A query with no kept key gets an all-zero output row (and all-zero probabilities).
 * Query i sits at position p = q_offset + i, or kv_len[b] - N + i when q_offset is
 * MH_Q_OFFSET_END (the default: the N queries are the last N keys' positions).
 */
#define MH_Q_OFFSET_END INT64_MIN

typedef struct mh_attn_options {
    int causal;                 /* 0 or 1 */
    int64_t q_offset;           /* MH_Q_OFFSET_END or an absolute position >= 0 with
                                 * q_offset + N + M <= INT64_MAX (else MH_ERR_INVALID_ARGUMENT) */
    int window;                 /* 0 = none; else keys with |p - j| < window are kept */
    const int32_t* kv_len;      /* [B] valid keys per sequence (0..M), or NULL = all M */
    const float* mask;          /* additive, indexed by the three strides below, or NULL */
    ptrdiff_t mask_stride_batch; /* 0 = broadcast over batch */
    ptrdiff_t mask_stride_head;  /* 0 = broadcast over heads */
    ptrdiff_t mask_stride_row;   /* between query rows; keys are contiguous */
    float softcap;              /* 0 = off; else > 0 */
    const float* alibi_slopes;  /* [H] or NULL */
    const float* sinks;         /* [H] or NULL: one extra logit per head */
    float* probs;               /* [B, H, N, M] out, or NULL: softmax probabilities per head */
    /* [B, N, H] per-(token, head) gates, or NULL = off (mh_attention only). A (token, head)
     * with gate 0 is skipped (no Q.K, softmax or P.V work; its output row is written as
     * zeros); any other row's output is multiplied by its gate. Gates must be finite
     * (MH_ERR_INVALID_ARGUMENT); mask and probs are MH_ERR_UNSUPPORTED with gates. */
    const float* head_gates;
    /* Partial attention over a shard of the keys (context parallelism, docs/scale-out.md). */
    float* lse;        /* [B, H, N] out, or NULL: each row's natural log of the sum of exp over
                        * its kept scores (and its sink); -INFINITY flags a row with no kept key
                        * and no sink (its output row is zeros). Merge shards with
                        * mh_attention_merge; pass sinks on one shard only. */
    int64_t kv_offset; /* absolute position of key 0, >= 0 (a shard holding keys from
                        * kv_offset); causal, window and ALiBi use absolute positions, the mask
                        * and probs the view's own key index. With MH_Q_OFFSET_END query i sits
                        * at kv_offset + kv_len[b] - N + i. */
    mh_compute compute; /* DEFAULT: the context's (mh_attention only; layers use their own) */
} mh_attn_options;

/* All zero, q_offset = MH_Q_OFFSET_END. */
MH_API mh_attn_options mh_attn_options_default(void);

/* ------------------------------------------------------------------ attention core */
/*
 * Attention on pre-projected tensors, for engines that project themselves.
 *   Q [B, N, H,   Dqk]   (f32)
 *   K [B, M, Hkv, Dqk]   (k_dtype)
 *   V [B, M, Hkv, Dv]    (v_dtype)
 *   O [B, N, H,   Dv]    (f32, written)
 * Query head h reads KV head h / (H / Hkv); H must be a multiple of Hkv. K/V are read in
 * place through their strides (e.g. straight from an engine's own cache); never copied whole.
 */
typedef struct mh_attn_problem {
    int batch, n_q, n_kv;          /* B, N, M */
    int n_heads, n_kv_heads;       /* H, Hkv */
    int head_dim_qk, head_dim_v;   /* Dqk, Dv */
    float scale;                   /* 0 = 1/sqrt(Dqk) */
    mh_tensor q, k, v;
    mh_dtype k_dtype, v_dtype;     /* q is always f32 */
    mh_tensor_out o;
} mh_attn_problem;

/* Workspace bytes mh_attention needs for this problem with this context. */
MH_API mh_status mh_attention_workspace_size(const mh_context* ctx, const mh_attn_problem* p,
                                             const mh_attn_options* opt, size_t* bytes);
/* Shape-only sizing for a caller that allocates once up front: the maxima of every problem it
 * will run. n_heads and n_kv_heads are exact; the others are maxima. */
typedef struct mh_attn_limits {
    int max_batch, max_q, max_kv;         /* B, N, M: every call has B, N, M <= these */
    int n_heads, n_kv_heads;              /* H, Hkv: exactly these (H % Hkv == 0) */
    int max_head_dim_qk, max_head_dim_v;  /* Dqk, Dv <= these */
} mh_attn_limits;

/* An upper bound of mh_attention_workspace_size for every problem within `lim` on this context:
 * any B, N, M, Dqk, Dv up to the maxima, any K/V dtypes, strides and options (causal, q_offset,
 * window, kv_len, mask, probs, head_gates, ...). It is the real need of the largest such problem,
 * not a margin over it. MH_ERR_SIZE_OVERFLOW when it does not fit size_t. */
MH_API mh_status mh_attention_workspace_bound(const mh_context* ctx, const mh_attn_limits* lim,
                                              size_t* bytes);
/* opt may be NULL (defaults). workspace must be 64-byte aligned. */
MH_API mh_status mh_attention(const mh_context* ctx, const mh_attn_problem* p,
                              const mh_attn_options* opt, void* workspace, size_t workspace_bytes);

/*
 * Merges P partial results of the same queries over disjoint key shards into the exact
 * result over all their keys (log-sum-exp rescaling, the arithmetic of the driver's own split
 * of decode keys; parts are folded in index order):
 *   outs[p] [B, N, H, Dv]  lses[p] [B, H, N]   (contiguous, as mh_attention writes them with
 *                                                lse and a contiguous o)
 *   out     [B, N, H, Dv]  written; lse_out [B, H, N] written, or NULL
 * A row whose every part has lse -INFINITY gets zeros (and -INFINITY). out may be outs[0]
 * (in place), lse_out lses[0]. n_parts 1 copies. MH_ERR_INVALID_ARGUMENT for NULL pointers,
 * sizes < 1 or out equal to another part; MH_ERR_SIZE_OVERFLOW when B*N*H*Dv floats are not
 * addressable (nothing written).
 */
MH_API mh_status mh_attention_merge(int n_parts, const float* const* outs,
                                    const float* const* lses, int batch, int n_q, int n_heads,
                                    int head_dim_v, float* out, float* lse_out);

/* ------------------------------------------------------------------ layers */
typedef enum mh_variant {
    MH_VARIANT_MHA = 0,     /* n_kv_heads == n_heads (0 = n_heads) */
    MH_VARIANT_GQA = 1,     /* n_heads % n_kv_heads == 0 */
    MH_VARIANT_MQA = 2,     /* n_kv_heads == 1 (0 = 1) */
    MH_VARIANT_MOH = 3,     /* mixture-of-head attention: mh_moh_config, mh_moh_weights */
    MH_VARIANT_OVERLAP = 4, /* overlapping heads (MOHSA): mh_overlap_config */
    MH_VARIANT_COLLAB = 5,  /* collaborative heads: mh_collab_config, mh_collab_weights */
    MH_VARIANT_DCMHA = 6    /* dynamically composable MHA: mh_dcmha_config, mh_dcmha_weights */
} mh_variant;

/*
 * Variant-specific parameters live in the variant's own config and weights structs, whose
 * first member is the variant tag; mh_layer_config.variant_config and
 * mh_layer_weights.variant_weights point at them (NULL = the variant's defaults / none). The
 * tag must equal config.variant (MH_ERR_INVALID_ARGUMENT otherwise, and for a variant struct
 * given to a variant without one), so another variant's parameters cannot pass silently.
 * Start from mh_<variant>_config_default() / mh_<variant>_weights_default(), which set the tag.
 */

/* MoH (docs/variants.md, "MoH"): heads 0..shared_heads-1 always run; each token also runs the
 * top_k of the routed heads shared_heads..H-1. */
typedef enum mh_moh_router {
    MH_MOH_ROUTER_LEARNED = 0, /* weighted gates from W_r, W_s, W_h on the layer input */
    MH_MOH_ROUTER_NORM = 1     /* binary gates: top_k of ||q_h|| over the routed heads */
} mh_moh_router;

typedef struct mh_moh_config {
    mh_variant variant; /* MH_VARIANT_MOH */
    mh_moh_router router;
    int shared_heads; /* h_s, 0..H */
    int top_k;        /* K, 0..H - h_s */
} mh_moh_config;

/* The learned router's weights (docs/api.md has which ones a config uses); NULL when unused. */
typedef struct mh_moh_weights {
    mh_variant variant;    /* MH_VARIANT_MOH */
    const float* w_router; /* W_r [H - shared_heads, d_model] */
    const float* w_shared; /* W_s [shared_heads, d_model] */
    const float* w_stage;  /* W_h [2, d_model] */
} mh_moh_weights;

/* Overlapping heads (MOHSA; docs/variants.md, "Overlapping heads"). */
typedef struct mh_overlap_config {
    mh_variant variant; /* MH_VARIANT_OVERLAP */
    int overlap;        /* o, dims borrowed from each neighbour, 0..head_dim */
} mh_overlap_config;

/* CollabHead (docs/variants.md, "CollabHead"). */
typedef struct mh_collab_config {
    mh_variant variant; /* MH_VARIANT_COLLAB */
    int collab_dim;     /* D~, the shared query/key width, >= 1 (no default) */
} mh_collab_config;

typedef struct mh_collab_weights {
    mh_variant variant;   /* MH_VARIANT_COLLAB */
    const float* mix;     /* M [H, D~] */
    const float* content; /* C [H, kdim] */
} mh_collab_weights;

/* DCMHA (docs/variants.md, "DCMHA"). */
typedef enum mh_gelu {
    MH_GELU_ERF = 0, /* exact GELU (PyTorch nn.GELU()) */
    MH_GELU_TANH = 1 /* tanh approximation (JAX nn.gelu default) */
} mh_gelu;

#define MH_DCMHA_MAX_RANK 8

typedef struct mh_dcmha_config {
    mh_variant variant; /* MH_VARIANT_DCMHA */
    int rank;           /* R, 0 = 2; 1 .. MH_DCMHA_MAX_RANK */
    int hidden;         /* C per group, 0 = 4 * H / groups */
    int groups;         /* G, 0 = 1: composition is block-diagonal over G groups of H/G heads */
    mh_gelu gelu;
    int static_weights; /* 1: W_b pre and post are given */
} mh_dcmha_config;

/* Row-major, DCPythia layouts; branch axis 0 pre/query, 1 pre/key, 2 post/query, 3 post/key;
 * G groups of Hg = H/G heads, C hidden, R rank. */
typedef struct mh_dcmha_weights {
    mh_variant variant;   /* MH_VARIANT_DCMHA */
    const float* w1;      /* [d_model, G, 4, C]     hidden projection (GELU after) */
    const float* w2;      /* [G, 4, C, 2R, Hg]      hidden -> w1 (first R) | w2 */
    const float* wd;      /* [d_model, G, 4, Hg]    gate projection (tanh after) */
    const float* wb_pre;  /* [G, Hg, Hg] static pre-composition minus I; static_weights */
    const float* wb_post; /* [G, Hg, Hg] static post-composition minus I */
} mh_dcmha_weights;

/* The tag set, everything else 0 (each variant's defaults). */
MH_API mh_moh_config mh_moh_config_default(void);
MH_API mh_moh_weights mh_moh_weights_default(void);
MH_API mh_overlap_config mh_overlap_config_default(void);
MH_API mh_collab_config mh_collab_config_default(void);
MH_API mh_collab_weights mh_collab_weights_default(void);
MH_API mh_dcmha_config mh_dcmha_config_default(void);
MH_API mh_dcmha_weights mh_dcmha_weights_default(void);

/* ------------------------------------------------------------------ positions */
/*
 * Rotary position embeddings (RoPE) of q and k, applied after the projection, its bias and
 * QK-norm, and before k enters a cache. Within each q/k head, pair i (0 <= i < r/2) of the
 * first r = rotary_dim dims turns by the angle a = fl32(pos * inv_freq[i]) (an f32 product,
 * as PyTorch computes it): (x, y) -> (x cos a - y sin a, x sin a + y cos a); dims r..D-1 pass.
 *   MH_ROTARY_HALF:        x = dim i, y = dim i + r/2   (rotate-half: GPT-NeoX, HF LLaMA, Qwen)
 *   MH_ROTARY_INTERLEAVED: x = dim 2i, y = dim 2i + 1   (GPT-J, Meta's LLaMA)
 * Positions: a forward's query i sits at position p (mh_attn_options: q_offset + i, or
 * kv_len[b] - N + i), its key j at j; decode's new tokens at their cache positions. pos is
 * rounded to f32 before the product (exact below 2^24), as PyTorch's position_ids.float().
 * The default table is HF transformers' in f32: inv_freq[i] = 1 / theta^(fl32(2i / r)).
 * Bad values (MH_ERR_INVALID_ARGUMENT at create): rotary_dim odd, < 0 or > head_dim; theta
 * NaN, inf or < 0; a table entry NaN, inf or < 0; qk_norm not 0/1; qk_norm_eps NaN, inf or < 0.
 */
typedef enum mh_rotary_layout {
    MH_ROTARY_NONE = 0,
    MH_ROTARY_HALF = 1,
    MH_ROTARY_INTERLEAVED = 2
} mh_rotary_layout;

typedef struct mh_rotary_config {
    mh_rotary_layout layout; /* MH_ROTARY_NONE = no rotary (the other fields are not read) */
    int rotary_dim;          /* r: even, 2..head_dim; 0 = head_dim (partial rotary: Pythia) */
    float theta;             /* base of the default table inv_freq[i] = theta^(-2i/r); 0 = 10000 */
    /* [r/2] the caller's inverse frequencies (finite, >= 0), copied at create, or NULL = the
     * default table. Linear, NTK, YaRN and LLaMA 3.1 scaling are each such a table. */
    const float* inv_freq;
} mh_rotary_config;

typedef struct mh_layer_config {
    mh_variant variant;
    int d_model;     /* width of the query input and of the output */
    int n_heads;     /* H */
    int n_kv_heads;  /* Hkv; 0 = the variant's default (H for MHA, 1 for MQA) */
    int head_dim;    /* D: per-head q/k width */
    int head_dim_v;  /* Dv: per-head v width; 0 = head_dim */
    int kdim, vdim;  /* key/value input widths (cross-attention); 0 = d_model */
    int bias;        /* 1: q/k/v/out projections have biases */
    float scale;     /* 0 = 1/sqrt(head_dim) */
    /* model-level score options, copied at create */
    int window;                /* sliding window, 0 = none */
    float softcap;             /* 0 = off */
    const float* alibi_slopes; /* [n_heads] or NULL */
    const float* sinks;        /* [n_heads] or NULL */
    /* The variant's own config (mh_moh_config, mh_overlap_config, mh_collab_config,
     * mh_dcmha_config; tag = variant), copied at create; NULL = its defaults. */
    const void* variant_config;
    /* Positions (MHA/GQA/MQA, MoH and DCMHA; MH_ERR_UNSUPPORTED for the others) */
    mh_rotary_config rotary;   /* layout 0 = none */
    int qk_norm;               /* 1: per-head RMSNorm of q and k before rotary (Qwen3, Gemma 3):
                                  x * w / sqrt(mean(x^2) + eps), w = weights' q_norm / k_norm */
    float qk_norm_eps;         /* 0 = 1e-6 */
    mh_compute compute;        /* DEFAULT: the context's compute mode */
} mh_layer_config;

/* PyTorch nn.Linear layout; copied and packed at create, the caller keeps ownership. */
typedef struct mh_layer_weights {
    const float* w_q; /* [H*D,    d_model] */
    const float* w_k; /* [Hkv*D,  kdim]    */
    const float* w_v; /* [Hkv*Dv, vdim]    */
    const float* w_o; /* [d_model, H*Dv]   (overlapping heads: [d_model, H*(Dv + 2o)]) */
    const float* b_q; /* [H*D]    or NULL when bias == 0 */
    const float* b_k; /* [Hkv*D]  */
    const float* b_v; /* [Hkv*Dv] */
    const float* b_o; /* [d_model] */
    /* The variant's own weights (mh_moh_weights, mh_collab_weights, mh_dcmha_weights; tag =
     * config.variant), read at create; NULL = none. */
    const void* variant_weights;
    /* [D] QK-norm weights, given exactly when config.qk_norm (missing with it, or given without
     * it: MH_ERR_INVALID_ARGUMENT); copied at create. Gemma's (1 + w) convention: pass 1 + w. */
    const float* q_norm;
    const float* k_norm; /* [D] */
} mh_layer_weights;

typedef struct mh_layer mh_layer;

MH_API mh_layer_config mh_layer_config_default(void); /* MHA, everything else 0 */
/* Copies the context's ISA and thread count; ctx may be destroyed afterwards. */
MH_API mh_status mh_layer_create(const mh_context* ctx, const mh_layer_config* config,
                                 const mh_layer_weights* weights, mh_layer** out);
MH_API void mh_layer_destroy(mh_layer* layer); /* accepts NULL */
/* The config as validated (defaults resolved, including scale and compute; pointers cleared,
 * including variant_config: read that with mh_layer_get_variant_config). A shard's is the full
 * layer's (mh_layer_get_shard tells its heads). */
MH_API mh_status mh_layer_get_config(const mh_layer* layer, mh_layer_config* out);
/* The variant's config as validated (defaults resolved) into `out`, a mh_<variant>_config
 * whose tag the caller set to the layer's variant (MH_ERR_INVALID_ARGUMENT if it differs or
 * the variant has no config struct). */
MH_API mh_status mh_layer_get_variant_config(const mh_layer* layer, void* out);
/* Bytes of packed weights the layer holds. */
MH_API size_t mh_layer_weights_bytes(const mh_layer* layer);

/*
 * Head-sharded layers (tensor parallelism, docs/scale-out.md). Shard `index` of `count` of the
 * layer (config, weights) holds query heads [index * H/count, (index + 1) * H/count), the K/V
 * heads they read (whole groups; MQA's one K/V head on every shard), their rows of W_Q, W_K,
 * W_V and biases, the matching columns of W_O, and its KV caches only those K/V heads. Its
 * forward and decode write a partial output [.., d_model]: the sum over the shards is the
 * full layer's output; shard 0 alone adds b_o. MHA/GQA/MQA and MoH (each shard routes on the
 * full head set, so its routing record equals the full layer's, and runs its selected local
 * heads; the norm router's shards project every head's query to route on); MH_ERR_UNSUPPORTED
 * for the variants that mix heads (overlapping heads, CollabHead, DCMHA). MH_ERR_INVALID_ARGUMENT if count < 1, index outside 0 .. count - 1, or H (or
 * Hkv > 1) is not a multiple of count. count 1 is the full layer.
 */
MH_API mh_status mh_layer_create_shard(const mh_context* ctx, const mh_layer_config* config,
                                       const mh_layer_weights* weights, int index, int count,
                                       mh_layer** out);

typedef struct mh_shard_info {
    int index, count;               /* 0, 1 for a layer made by mh_layer_create */
    int head_begin, n_heads;        /* the full layer's query heads this layer holds */
    int kv_head_begin, n_kv_heads;  /* and its K/V heads */
} mh_shard_info;
MH_API mh_status mh_layer_get_shard(const mh_layer* layer, mh_shard_info* out);

/*
 * MHA -> GQA/MQA conversion (GQA paper): K/V head j of the result is the mean of the source's
 * K/V heads j*g .. j*g + g - 1, g = (source K/V heads) / n_kv_heads, for W_K, W_V and their
 * biases (W_Q, W_O and their biases carry over unchanged). The source is a layer of the GQA
 * family (MHA, or a GQA/MQA layer pooled further) whose K/V head count is a multiple of
 * n_kv_heads; only w->w_k, w_v, b_k, b_v are read. Writes, into caller buffers that must not
 * overlap the source (nothing is allocated):
 *   w_k [n_kv_heads*D, kdim]   w_v [n_kv_heads*Dv, vdim]
 *   b_k [n_kv_heads*D]         b_v [n_kv_heads*Dv]        (when src->bias; else may be NULL)
 * n_kv_heads equal to the source's K/V heads returns the source weights unchanged.
 */
MH_API mh_status mh_convert_mha_to_gqa(const mh_layer_config* src, const mh_layer_weights* w,
                                       int n_kv_heads, float* w_k, float* w_v, float* b_k,
                                       float* b_v);

/* What a MoH layer's router chose in one call, A = shared_heads + top_k heads per token. */
typedef struct mh_routing_record {
    int32_t* heads; /* [B, N, A] the active heads of each token, ascending */
    float* gates;   /* [B, N, A] their gates (1 with the norm router) */
    int64_t* load;  /* [H] tokens of the call that ran each head */
} mh_routing_record;

/*
 * One forward call over a batch.
 *   query [B, N, d_model]  key [B, M, kdim]  value [B, M, vdim]   (row-major, contiguous)
 *   out   [B, N, d_model]
 * Self-attention: key and value NULL (they are the query input, M = N).
 * Cross-attention: key and value both given, M = n_kv.
 * opt carries the per-call options (causal, q_offset, kv_len, mask, probs [B, H, N, M]); the
 * model-level ones (window, softcap, alibi_slopes, sinks) come from the layer config and must
 * be left 0/NULL in opt (MH_ERR_INVALID_ARGUMENT otherwise).
 */
typedef struct mh_forward_args {
    int batch, n_q, n_kv;  /* n_kv ignored (= n_q) for self-attention */
    const float* query;
    const float* key;
    const float* value;
    float* out;
    const mh_attn_options* opt; /* NULL = defaults (no mask) */
    mh_routing_record* routing; /* MoH only: filled when not NULL */
} mh_forward_args;

/* For self-attention pass n_kv = n_q. */
MH_API mh_status mh_layer_forward_workspace_size(const mh_layer* layer, int batch, int n_q,
                                                 int n_kv, size_t* bytes);
/* workspace must be 64-byte aligned. */
MH_API mh_status mh_layer_forward(const mh_layer* layer, const mh_forward_args* args,
                                  void* workspace, size_t workspace_bytes);

/* ------------------------------------------------------------------ conversions */
/*
 * CollabHead from an MHA layer, exact (docs/variants.md, "CollabHead"): D~ = H*D, W~_Q = W_Q,
 * W~_K = W_K, block one-hot mixing M[h, h*D : h*D + D] = 1, content bias C[h, :] = W_K^h^T b_Q^h,
 * b_K dropped (the softmax ignores it), W_V, b_V, W_O, b_O unchanged. Nothing is allocated:
 *   mix     [H, H*D] written
 *   content [H, kdim] written (zeros when the MHA has no bias)
 *   collab  the CollabHead config (variant MH_VARIANT_COLLAB, n_kv_heads 0, scale, kdim,
 *           vdim and model-level options as in the MHA config; variant_config = collab_cfg)
 *   collab_cfg  its mh_collab_config (collab_dim = H*D)
 *   collab_weights  points at the MHA's own w_q, w_k, w_v, w_o, b_v, b_o (reused, not
 *           copied: keep them alive until mh_layer_create); variant_weights = collab_mixing
 *   collab_mixing  its mh_collab_weights: mix and content
 * mha may be MH_VARIANT_MHA, or GQA/MQA with n_kv_heads == n_heads. On error nothing is written.
 */
MH_API mh_status mh_convert_mha_to_collab(const mh_layer_config* mha,
                                          const mh_layer_weights* mha_weights, float* mix,
                                          float* content, mh_layer_config* collab,
                                          mh_collab_config* collab_cfg,
                                          mh_layer_weights* collab_weights,
                                          mh_collab_weights* collab_mixing);

/* ------------------------------------------------------------------ KV cache and decode */
/*
 * A KV cache for one layer: up to max_seqs sequences (ids 0 .. max_seqs - 1), each with its own
 * length (ragged batches: continuous batching). A sequence is empty (length 0) until a decode
 * appends to it; mh_kv_cache_seq_reset empties it for reuse. Storage is either
 *   contiguous: each sequence owns `capacity` tokens, or
 *   paged:      a pool of n_blocks blocks of block_size tokens taken as sequences grow and
 *               returned when they are reset; mh_kv_cache_seq_fork shares a sequence's blocks
 *               with another (copy on write of a shared block when either appends to it).
 * Nothing is allocated after create. Only the thread using a cache may touch it during a call.
 */
typedef struct mh_kv_cache mh_kv_cache;

typedef struct mh_kv_cache_config {
    int max_seqs;   /* sequences held at once, >= 1 */
    int capacity;   /* the most tokens one sequence can hold, >= 1 */
    mh_dtype dtype; /* of the stored K/V */
    int block_size; /* 0: contiguous; else paged with blocks of block_size tokens, a multiple
                       of the driver's key tile (64; SVE wider than 512 bits: 128 or 256) */
    int n_blocks;   /* paged: blocks in the pool; 0 = max_seqs * ceil(capacity / block_size) */
} mh_kv_cache_config;

/* max_seqs 1, everything else 0 (capacity must be set). */
MH_API mh_kv_cache_config mh_kv_cache_config_default(void);
/* MH_ERR_UNSUPPORTED for a cross-attention layer (kdim or vdim != d_model): it cannot decode;
 * and for a paged cache of a variant that cannot read one (CollabHead, DCMHA) or of a layer
 * with a sliding window (its key tiles would straddle blocks). */
MH_API mh_status mh_kv_cache_create_ex(const mh_layer* layer, const mh_kv_cache_config* config,
                                       mh_kv_cache** out);
/* A contiguous cache of `batch` sequences: mh_kv_cache_create_ex with max_seqs = batch. */
MH_API mh_status mh_kv_cache_create(const mh_layer* layer, int batch, int capacity,
                                    mh_dtype dtype, mh_kv_cache** out);
MH_API void mh_kv_cache_destroy(mh_kv_cache* cache); /* accepts NULL */
MH_API void mh_kv_cache_reset(mh_kv_cache* cache);   /* every sequence empty */
/* The longest sequence's length (every sequence's, when they advance together). */
MH_API int mh_kv_cache_length(const mh_kv_cache* cache);
MH_API int mh_kv_cache_capacity(const mh_kv_cache* cache);
/* Bytes of K/V storage per token (all KV heads, one sequence). */
MH_API size_t mh_kv_cache_bytes_per_token(const mh_kv_cache* cache);
/* Sequence `seq`'s length; MH_ERR_INVALID_ARGUMENT for an id outside 0 .. max_seqs - 1. */
MH_API mh_status mh_kv_cache_seq_length(const mh_kv_cache* cache, int seq, int* length);
/* Empties sequence `seq` (its blocks go back to the pool); the others are untouched. */
MH_API mh_status mh_kv_cache_seq_reset(mh_kv_cache* cache, int seq);
/* Makes the empty sequence `dst` a copy of `src` (same tokens, same length): a paged cache
 * shares src's blocks (no copy; counted in mh_kv_cache_free_blocks), a contiguous one copies.
 * MH_ERR_INVALID_ARGUMENT if dst is not empty or an id is unknown; nothing changes on error. */
MH_API mh_status mh_kv_cache_seq_fork(mh_kv_cache* cache, int src, int dst);
/* Paged: blocks of the pool held by no sequence. Contiguous: 0. */
MH_API int mh_kv_cache_free_blocks(const mh_kv_cache* cache);

/*
 * Appends tokens to `batch` sequences of the cache and attends causally over each one's whole
 * history: sequence seq_ids[i] (default i) gets n_new_seq[i] (default n_new) new tokens, at
 * positions length .. length + n - 1 of that sequence. The rows of x and out are packed in
 * that order: [sum of the counts, d_model] ([B, n_new, d_model] with the defaults). Each
 * sequence's output equals the causal self-attention forward over all its tokens so far;
 * sequences not named are untouched. Lengths grow only on success. Counts may be > 1 (chunked
 * prefill). MH_ERR_CACHE_FULL (nothing changes) when a sequence would pass capacity or a
 * paged pool has too few free blocks for the whole call.
 */
typedef struct mh_decode_args {
    int batch, n_new;           /* B sequences in this call (1 .. max_seqs), tokens per sequence */
    const float* x;             /* [B, n_new, d_model] */
    float* out;                 /* [B, n_new, d_model] */
    /* MoH only: the routing of the new tokens ([rows of x, A], load over this call), filled
     * when not NULL; MH_ERR_INVALID_ARGUMENT when given to a layer of another variant. */
    mh_routing_record* routing;
    /* Ragged batches (NULL = the defaults above). */
    const int32_t* seq_ids;   /* [batch] distinct ids in 0 .. max_seqs - 1, or NULL = 0 .. B-1 */
    const int32_t* n_new_seq; /* [batch] counts >= 1, each <= n_new, or NULL = n_new each */
} mh_decode_args;

/* Enough for any call of up to `batch` sequences with counts up to n_new each. */
MH_API mh_status mh_layer_decode_workspace_size(const mh_layer* layer, int batch, int n_new,
                                                size_t* bytes);
/* workspace must be 64-byte aligned. */
MH_API mh_status mh_layer_decode(const mh_layer* layer, mh_kv_cache* cache,
                                 const mh_decode_args* args, void* workspace,
                                 size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#endif /* MULTIHEAD_H */
