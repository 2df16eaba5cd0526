/*
 * The tiny decoder's model (tiny_decoder_model.c): weights from a safetensors file written by
 * gen_tiny_decoder.py or bench/accuracy/train.py (tiny_decoder_torch.py is the model in
 * PyTorch), one mh_layer per transformer layer, the step that runs a packed batch of new tokens
 * through every layer and its KV cache (the attention through mh_layer_decode), and a causal
 * forward over whole windows (mh_layer_forward). Embedding, RMSNorm, SwiGLU MLP and the tied
 * LM head are plain C loops.
 */
#ifndef TINY_DECODER_MODEL_H
#define TINY_DECODER_MODEL_H

#include <multihead.h>
#include <stdint.h>

#include "safetensors_read.h"

/* The model's shape, from the weight file's metadata. */
typedef struct td_config {
    mh_variant variant; /* MH_VARIANT_GQA (MHA, GQA, MQA by n_kv_heads), _MOH, _OVERLAP, _COLLAB
                           or _DCMHA */
    int vocab, d_model, layers, n_heads, n_kv_heads, head_dim, ffn;
    float norm_eps;     /* of every RMSNorm */
    int rotary;         /* 1: rotate-half rotary on q and k (theta below), 0: none */
    float theta;
    int pos_ctx;        /* > 0: a learned position embedding of pos_ctx positions; 0: none */
    mh_moh_router moh_router;                        /* MoH */
    int moh_shared, moh_top_k;
    int overlap;                                     /* overlapping heads: o */
    int collab_dim;                                  /* CollabHead: D~ */
    int dc_rank, dc_hidden, dc_groups, dc_static;    /* DCMHA */
} td_config;

/* One transformer layer: x += attn(norm(x)); x += mlp(norm(x)). */
typedef struct td_layer {
    const float* attn_norm; /* [d_model] */
    const float* mlp_norm;  /* [d_model] */
    const float* w_gate;    /* [ffn, d_model] */
    const float* w_up;      /* [ffn, d_model] */
    const float* w_down;    /* [d_model, ffn] */
    mh_layer* attn;
    mh_kv_cache* cache;     /* set by the caller (td_model_contiguous_caches or its own) */
} td_layer;

typedef struct td_model {
    td_config cfg;
    st_file file;
    const float* embed;      /* [vocab, d_model], also the LM head */
    const float* final_norm; /* [d_model] */
    const float* pos_embed;  /* [pos_ctx, d_model] or NULL */
    td_layer* layer;         /* [layers] */
    int max_rows;            /* the most rows one step takes */
    float *x, *h, *a, *g, *u; /* [max_rows, d_model] x3, [max_rows, ffn] x2 */
    int *pos, *out_rows;      /* [max_rows] each row's position; 0, 1, ... (a forward's rows) */
    void* ws;                /* the decode workspace, ws_bytes */
    size_t ws_bytes;
} td_model;

/* Loads `path` and creates its layers; the workspace covers calls of up to max_batch
 * sequences with up to max_n_new tokens each, at most max_rows rows in all. 0 on success, else
 * -1 with a message printed (td_model_destroy is still safe). */
int td_model_load(td_model* m, const char* path, int max_batch, int max_n_new, int max_rows);
void td_model_destroy(td_model* m); /* the caches too */

/* Grows the workspace for td_model_forward calls of up to `batch` windows of n tokens
 * (batch * n <= max_rows of td_model_load). */
int td_model_reserve_forward(td_model* m, int batch, int n);

/* One contiguous f32 cache per layer, of max_seqs sequences of `capacity` tokens. */
int td_model_contiguous_caches(td_model* m, int max_seqs, int capacity);

/*
 * One decode step on every layer: the packed rows tokens[rows] belong to the sequences and
 * counts of `call` (batch, n_new, seq_ids, n_new_seq; x/out are filled here). Writes the
 * logits [n_out, vocab] of rows out_rows[0..n_out). Returns the first failing status.
 */
mh_status td_model_step(td_model* m, const mh_decode_args* call, const int32_t* tokens, int rows,
                        const int* out_rows, int n_out, float* logits);

/*
 * Causal forward of `batch` windows of n tokens each, every window from position 0 (no cache):
 * tokens [batch, n] -> logits [batch * n, vocab], the attention through mh_layer_forward.
 */
mh_status td_model_forward(td_model* m, int batch, int n, const int32_t* tokens, float* logits);

#endif /* TINY_DECODER_MODEL_H */
