// The K/V tensors of an attention-core case as the library reads them (mh_attention), in the
// case's layout and storage dtype, one buffer per tensor: the values, then (int8) the rows'
// f32 scales.
//
// Layouts (elements; o = the overlapping heads' halo, 0 for disjoint heads):
//   token-major   [B][M][Hkv*D + 2o]: what projections produce (prefill), or an engine's own
//                 cache read in place (decode with CaseSpec::token_major): stride_token = Hkv*D
//                 + 2o, stride_head = D
//   head-major    decode: the library's KV cache layout, one stream per K/V head
//                 [B][Hkv][M][D] whose streams are kHeadPad elements apart; overlapping heads
//                 keep ONE padded stream per token row [B][1][M][Hkv*D + 2o] (the layer's
//                 cache), the heads' windows at stride D inside it
// The unit of int8 quantisation is a stream row: a (token, K/V head) row of D values, or for
// overlapping heads a token's whole padded row (its heads' windows overlap, so they share one
// scale: scale_stride_head 0). Scales [B][streams][M] (head-major, as the library's cache keeps
// them) or [B][M][streams] (token-major).
#ifndef MH_BENCH_CORE_KV_H
#define MH_BENCH_CORE_KV_H

#include <cstddef>

#include "multihead.h"

namespace mhb {

struct CoreKvLayout {
    mh_dtype dtype = MH_DTYPE_F32;
    int batch = 1, n_kv = 1;          // B, M
    int streams = 1;                  // stream rows per token (Hkv; 1 for overlapping heads)
    ptrdiff_t row_len = 0;            // values per stream row (D; Hkv*D + 2o)
    ptrdiff_t row_stride = 0;         // elements between a token's stream rows
    ptrdiff_t sb = 0, st = 0, sh = 0; // the view's element strides (sh: between heads)
    ptrdiff_t ssb = 0, sst = 0, ssh = 0;  // the view's scale strides, in floats (int8 only)
    size_t elems = 0;                 // elements of one tensor, pads included
    size_t n_scales = 0;              // B*M*streams for int8, else 0
    size_t scale_offset = 0;          // bytes from a tensor's start to its scales (64-aligned)
    size_t bytes = 0;                 // one tensor's buffer: values, then scales
    size_t token_bytes = 0;           // what one token adds to one tensor: values + scales
};

// head_major: the decode cache layout above; else token-major.
CoreKvLayout core_kv_layout(bool head_major, int B, int M, int Hkv, int D, int o, mh_dtype dtype);

// The mh_tensor view of a tensor stored in `buf` (scales set for int8, NULL otherwise).
mh_tensor core_kv_view(const CoreKvLayout& g, const void* buf);

// Stores token (b, j): `row` [streams * row_len] floats, stream row s at row[s * row_len]
// (overlapping heads: head h's D values at row[o + h*D], the halos zero), converted to the
// layout's dtype (int8: each stream row quantised with its own scale).
void store_token(const CoreKvLayout& g, void* buf, int b, int j, const float* row);

}  // namespace mhb

#endif
