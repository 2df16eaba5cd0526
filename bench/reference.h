// The double-precision oracle for the max_abs_err / rel_l2_err counters, written straight from
// the math in multihead.h (and docs/variants.md). It covers what the cases use: causal or full
// attention with the queries at the end of the keys (q_offset = MH_Q_OFFSET_END), no mask,
// every key valid; self- and cross-attention layers with or without bias.
//
// The attention part is naive double loops, evaluated only on the heads and query rows a case
// asks for (cases.cc picks a sub-slice when the whole output would be slow and reports the
// fraction it checked as ref_checked_fraction). The layer's projections are double GEMMs:
// cblas_dgemm when the harness is built with OpenBLAS (it is then ~50x faster than loops), plain
// double loops otherwise; both accumulate in double from the float inputs and weights.
#ifndef MH_BENCH_REFERENCE_H
#define MH_BENCH_REFERENCE_H

#include <vector>

#include "multihead.h"

namespace mhb {

// Attention for the query heads `heads` and query rows `rows` (both ascending) of every batch.
// out [B, rows.size(), heads.size(), Dv], contiguous.
void ref_attention(const mh_attn_problem& p, bool causal, const std::vector<int>& heads, const std::vector<int>& rows,
                   std::vector<double>& out);

// y[T, n_out] = x[T, in] w[n_out, in]^T (+ b[n_out] when b), in double.
void ref_project(const float* x, int T, int in, const float* w, const float* b, int n_out, std::vector<double>& y);

// One sequence through a layer: queries xq [n_q, d_model]; keys/values xk [n_kv, kdim] and
// xv [n_kv, vdim] (self-attention: xk = xv = xq and n_kv = n_q). Causal puts query i at
// position n_kv - n_q + i. Evaluated at the query rows `rows` only. cfg must have every default
// resolved (mh_layer_get_config). out [rows.size(), d_model].
void ref_layer_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* xq, int n_q, const float* xk,
                    const float* xv, int n_kv, bool causal, const std::vector<int>& rows, std::vector<double>& out);

}  // namespace mhb

#endif
