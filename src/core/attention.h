/* Attention of the MHA/GQA/MQA family on the driver (core/driver.h). Arguments are validated
 * by the caller (src/api/attention_api.c or a variant); this layer trusts them. */
#ifndef MH_CORE_ATTENTION_H
#define MH_CORE_ATTENTION_H
#include "core/kv_pages.h"
#include "kernels/kernels.h"
#include "util/workspace.h"

/* Carves (or, with ws->base == NULL, measures) the workspace of a call with up to `threads`
 * workers; returns its start (NULL while measuring). prepack_ok: the caller sized this
 * workspace knowing the real M, so K/V may be packed once for the whole call (prefill). */
void* mh_core_attention_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                              int prepack_ok, mh_ws* ws);

/* The same, with room for the problem at any n_q in 1..p->n_q and any batch in 1..p->batch (a
 * caller that runs several calls of different sizes in one workspace, e.g. MoH's per-head
 * gathered rows, or a workspace bound). */
void* mh_core_attention_carve_upto(const mh_kernels* k, int threads, const mh_attn_problem* p,
                                   int prepack_ok, mh_ws* ws);

/* Keys per KV tile of a call in the bf16 compute mode (attn_prefill_kv_tile when it packs K/V
 * once for all its query tiles, else attn_kv_tile; a decode's wider tiles are f32 only): the
 * grid on which that mode rounds P. */
size_t mh_core_attention_kv_tile(const mh_kernels* k, const mh_attn_problem* p, int prepack_ok);

/* Runs attention; `ws` is what mh_core_attention_carve returned for the same arguments
 * (threads, p's shapes, prepack_ok). opt is never NULL here. */
void mh_core_attention(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       const mh_attn_options* opt, int prepack_ok, void* ws);

/* Internal extras of a call (MoH); a NULL member is off.
 *   q_pos     [B][N] absolute position of every query row, non-decreasing within a sequence;
 *             it replaces q_offset (rows gathered from a longer sequence keep their causal
 *             and window positions). A mask's rows are still indexed by the row number.
 *   kv_active [B][Hkv] 0: the task of that sequence and KV head is skipped (its K/V are not
 *             read and its output rows are not written).
 *   q_row     [B][N] row i reads Q and writes O at token q_row[i] of its sequence (Q and O
 *             strides), instead of at token i: rows gathered in place, without copies.
 *   o_scale   [B][N] every output row is multiplied by it after normalising (gates).
 *   pages     K/V are a cache's blocks: batch b's rows are found through it (core/kv_pages.h).
 *   next_k, next_v  the K and V (head 0 of batch 0: the views moved to it) of the call that
 *             follows this one, whose pack the last task requests in prefill as it requests a
 *             next head's within a call (mh_drv_stage.next_key; gathered heads, one call each). */
typedef struct mh_core_extra {
    const int64_t* q_pos;
    const unsigned char* kv_active;
    const int32_t* q_row;
    const float* o_scale;
    const mh_kv_pages* pages;
    const mh_tensor *next_k, *next_v;
} mh_core_extra;

void mh_core_attention_ex(const mh_kernels* k, int threads, const mh_attn_problem* p,
                          const mh_attn_options* opt, int prepack_ok, void* ws,
                          const mh_core_extra* ex);

#endif
