// A small double-precision reference, written straight from the math in multihead.h, for the
// max_abs_err / rel_l2_err counters. It covers only what the cases use: causal attention with
// the queries at the end of the keys (q_offset = MH_Q_OFFSET_END), no mask, every key valid,
// and self-attention layers without bias. It is naive, so the cases evaluate it on a subset of
// heads or rows when the whole output would take too long (see cases.cc).
#ifndef MH_BENCH_REFERENCE_H
#define MH_BENCH_REFERENCE_H

#include <vector>

#include "multihead.h"

namespace mhb {

// Causal attention for the query heads listed in `heads` (scale 0 = 1/sqrt(Dqk)).
// out [B, N, heads.size(), Dv], contiguous.
void ref_attention_causal(const mh_attn_problem& p, const std::vector<int>& heads,
                          std::vector<double>& out);

// The layer forward of one sequence x [T, d_model] (causal self-attention, no bias), evaluated
// at the query rows listed in `rows` only (each < T). cfg must have every default resolved
// (n_kv_heads, head_dim_v, kdim = vdim = d_model). out [rows.size(), d_model].
void ref_layer_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* x, int T,
                    const std::vector<int>& rows, std::vector<double>& out);

}  // namespace mhb

#endif
