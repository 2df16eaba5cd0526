/*
 * The accuracy report's C side (bench/accuracy/accuracy_eval.c): a trained model of
 * train.py, loaded by the tiny decoder's loader, scored on held-out text through the
 * library's layers, its attention layers timed (accuracy_timing.c), and a converted model
 * checked against the library's conversion (accuracy_convert.c).
 */
#ifndef MH_ACCURACY_H
#define MH_ACCURACY_H

#include "tiny_decoder_model.h"

typedef struct acc_timing {
    double prefill_ms; /* every layer's causal mh_layer_forward of one sequence, median */
    double decode_us;  /* every layer's one-token mh_layer_decode over the cached keys, median */
                       /* (both in CPU time of the calling thread: run with one thread) */
} acc_timing;

/* Times m's attention layers: a causal forward of `prefill` tokens, and a one-token decode
 * with `keys` tokens in each layer's (own, f32) cache. 0, or -1 with a message printed. */
int acc_time_layers(const td_model* m, int keys, int prefill, acc_timing* t);

/* 1 if m, a model train.py converted from the MHA model in file src_path without training it
 * (variant gqa: K/V heads mean-pooled; collab: D~ = H D), holds what the library's
 * mh_convert_mha_to_gqa (to 1e-6 of the largest weight: the means round differently) or
 * mh_convert_mha_to_collab (bit for bit) makes of src's layers, and every other tensor is
 * src's bit for bit (accuracy_convert.c). */
int acc_check_conversion(const td_model* m, const char* src_path);

#endif /* MH_ACCURACY_H */
