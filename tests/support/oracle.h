/*
 * The double-precision oracle: naive attention and layers written straight from the math in
 * docs/variants.md and the score order documented in multihead.h. Independent of the library:
 * it shares only the public header's structs (to read the same inputs).
 */
#ifndef MH_TEST_ORACLE_H
#define MH_TEST_ORACLE_H
#include "multihead.h"

#ifdef __cplusplus
extern "C" {
#ifdef __cplusplus
}
#endif
#endif

/* Decodes one stored K/V element to double (MH_DTYPE_I8: the int8 value, without its scale). */
double oracle_load(const void* base, mh_dtype dtype, ptrdiff_t index);

/* Element d of row (batch b, token j, head h) of a K/V view in dtype, dequantised in double
 * (MH_DTYPE_I8: the row's scale times the int8 value). */
double oracle_kv(const mh_tensor* t, mh_dtype dtype, int b, int j, int h, int d);

/* x rounded to bf16, nearest even, as an f32 (NaN stays NaN); _all: in place, x [n]. */
float oracle_round_bf16(float x);
void oracle_round_bf16_all(float* x, size_t n);

/* o [B, N, H, Dv] contiguous; probs [B, H, N, M] contiguous or NULL. opt may be NULL. */
/* With opt->compute == MH_COMPUTE_BF16 the products take bf16 operands as the library's bf16
 * compute defines them: the pre-scaled query fl32(q * scale) (scale in f32), K and V, each
 * rounded to bf16 (nearest even), and P as its online softmax rounds it (see rounded_weights);
 * scores, softmax sums and the probabilities output stay exact. */
/* The keys per tile on which the bf16 compute mode rounds P (relative to each tile's running
 * max): the library's key tile for the call (mh_core_attention_kv_tile; 64 unless a test sets
 * it). */
extern int oracle_bf16_key_tile;

void oracle_attention(const mh_attn_problem* p, const mh_attn_options* opt, double* o,
                      double* probs);

/* y[r, :] = x[r, :] W^T + b. x [rows, in] f32, W [out, in] (PyTorch), b [out] or NULL. */
void oracle_linear(const float* x, int rows, int in, const float* w, const float* b, int out,
                   double* y);

/* The per-head attention outputs o [B, N, H, Dv] of the layer (projections and attention,
 * no output projection). cfg as for oracle_layer_forward. */
void oracle_layer_heads(const mh_layer_config* cfg, const mh_layer_weights* w,
                        const mh_forward_args* args, double* o);

/* The whole layer forward (projections, attention, output projection) in double.
 * cfg must have its defaults resolved (n_kv_heads, head_dim_v, kdim, vdim, set).
 * out [B, N, d_model]. */
void oracle_layer_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                          const mh_forward_args* args, double* out);

#ifdef __cplusplus
}
#endif
#endif
