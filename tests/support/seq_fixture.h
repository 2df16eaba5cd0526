/* Ragged decode schedules for tests of ragged batches and paged caches: S sequences of their
 * own lengths, decoded in steps that each advance a random subset of them (random order,
 * random counts), the same steps replayable on any number of caches. */
#ifndef MH_TEST_SEQ_FIXTURE_H
#define MH_TEST_SEQ_FIXTURE_H
#include "multihead.h"
#include "rng.h"

enum { SEQ_MAX = 8 };

typedef struct seq_set {
    int n_seqs, d_model;
    int len[SEQ_MAX];  /* tokens of each sequence */
    float* x[SEQ_MAX]; /* [len, d_model] inputs of each sequence */
} seq_set;

/* Random inputs in [-1, 1) for n sequences of the given lengths. */
void seq_set_make(seq_set* s, int n, const int* len, int d_model, test_rng* r);
void seq_set_free(seq_set* s);

/* y[i] [len_i, d_model] = each sequence's own causal self-attention forward (batch 1). */
void seq_forward(const mh_layer* L, const seq_set* s, float** y);

/* Decodes every sequence to its end in steps of up to n_new tokens per sequence, with the
 * schedule seeded by `seed` (the same seed gives the same calls), into y[i] [len_i, d_model].
 * Sequences start at the cache's current lengths (0 .. len_i); every call is checked to
 * write no output row past its packed rows. max_batch bounds the sequences of one call (the
 * cache's max_seqs or less); all calls share one workspace of
 * mh_layer_decode_workspace_size(max_batch, n_new), the bound for every such call. Returns the
 * first failing status. */
mh_status seq_decode(const mh_layer* L, mh_kv_cache* cache, const seq_set* s, int n_new, int max_batch,
                     uint64_t seed, float** y);

/* One decode call: sequences ids[b] get cnt[b] tokens from rows x (packed) into out (packed),
 * with a fresh workspace for (batch, n_new). */
mh_status seq_call(const mh_layer* L, mh_kv_cache* cache, int batch, int n_new, const int32_t* ids,
                   const int32_t* cnt, const float* x, float* out);

/* A cache of the given storage: block_size 0 is contiguous. */
mh_kv_cache* seq_cache(const mh_layer* L, int max_seqs, int capacity, mh_dtype dt, int block_size,
                       int n_blocks);

/* Outputs of n sequences: y[i] [len_i, d_model] allocated. */
void seq_outputs(const seq_set* s, float** y);
void seq_outputs_free(const seq_set* s, float** y);

#endif
