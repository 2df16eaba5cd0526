/* The tiled online-softmax attention driver. Arguments are validated by the caller
 * (src/api/attention_api.c or a variant); this layer trusts them. */
#ifndef MH_CORE_ATTENTION_H
#define MH_CORE_ATTENTION_H
#include "kernels/kernels.h"
#include "util/workspace.h"

/* Carves (or, with ws->base == NULL, measures) the scratch of `threads` workers; returns its
 * start (NULL while measuring). */
void* mh_core_attention_carve(const mh_kernels* k, int threads, const mh_attn_problem* p, mh_ws* ws);

/* Runs attention with at most `threads` workers; `ws` is what mh_core_attention_carve returned
 * for the same arguments. opt is never NULL here. */
void mh_core_attention(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       const mh_attn_options* opt, void* ws);

#endif
