/*
 * The accuracy report's C side (bench/accuracy/accuracy_eval.c): a trained model of
 * train.py, loaded by the tiny decoder's loader, scored on held-out text through the
 * library's layers, and its attention layers timed (accuracy_timing.c).
 */
#ifndef MH_ACCURACY_H
#define MH_ACCURACY_H

#include "tiny_decoder_model.h"

typedef struct acc_timing {
    double prefill_ms; /* every layer's causal mh_layer_forward of one sequence, median */
    double decode_us;  /* every layer's one-token mh_layer_decode over the cached keys, median */
} acc_timing;

/* Times m's attention layers: a causal forward of `prefill` tokens, and a one-token decode
 * with `keys` tokens in each layer's (own, f32) cache. 0, or -1 with a message printed. */
int acc_time_layers(const td_model* m, int keys, int prefill, acc_timing* t);

#endif /* MH_ACCURACY_H */
