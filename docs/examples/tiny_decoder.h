/*
 * What tiny_decoder.c (the single-sequence run) and tiny_decoder_serve.c (continuous batching)
 * share: the reference generations and the check of one step's logits against them.
 */
#ifndef TINY_DECODER_H
#define TINY_DECODER_H

#include <stdint.h>

#include "tiny_decoder_model.h"

/* Logits match when max |logit - ref| <= TD_TOL * max |ref| over the vocabulary (the largest
 * logit of a step is 18 to 39 in the three models, so this is 2e-3 to 4e-3 absolute; torch's
 * own float32 run is within 1.3e-5 x of the float64 reference, this program within 4e-6 x for
 * GQA and MoH and 1.3e-5 x for DCMHA). */
#define TD_TOL 1e-4

/* Prompt i of the reference file and its greedy generation by PyTorch. */
typedef struct td_reference {
    const int32_t* prompt; /* [n] bytes */
    int n;
    const int32_t* tokens; /* [gen] the generated tokens */
    const float* logits;   /* [gen, vocab]: step s's logits, whose argmax is tokens[s] */
    int gen;
    int vocab;
} td_reference;

/* Compares one step's logits [vocab] with the reference's; returns their argmax (ties: the
 * lower token) and raises *worst to the step's error relative to max |ref|. */
int td_check_step(const float* logits, const float* ref, int vocab, double* worst);

/* Serves refs[0..n) on a paged cache with `slots` sequences at a time (tiny_decoder_serve.c);
 * prints a check line per property and returns the number that failed. */
int td_serve(const char* model_path, const td_reference* refs, int n, int slots);

#endif /* TINY_DECODER_H */
