/* The tiled online-softmax attention driver. Arguments are validated by the caller
 * (src/api/attention_api.c or a variant); this layer trusts them. */
#ifndef MH_CORE_ATTENTION_H
#define MH_CORE_ATTENTION_H
#include "kernels/kernels.h"
#include "util/workspace.h"

/* Carves (or, with ws->base == NULL, measures) the workspace of a call with up to `threads`
 * workers; returns its start (NULL while measuring). prepack_ok: the caller sized this
 * workspace knowing the real M, so K/V may be packed once for the whole call (prefill). */
void* mh_core_attention_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                              int prepack_ok, mh_ws* ws);

/* Runs attention; `ws` is what mh_core_attention_carve returned for the same arguments
 * (threads, p's shapes, prepack_ok). opt is never NULL here. */
void mh_core_attention(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       const mh_attn_options* opt, int prepack_ok, void* ws);

#endif
