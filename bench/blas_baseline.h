// The baseline "attention a C user writes without this library": for every (batch, query head)
//   S = scale * Q_h K_{h/g}^T        one cblas_sgemm (the full N x M block, causal or not)
//   causal mask, row softmax          a plain loop with expf
//   O_h = P V_{h/g}                   one cblas_sgemm
// and, for the layer modes, the four projections as cblas_sgemm plus bias loops. Float32 K/V
// only (BLAS has no f16 GEMM). OpenBLAS's own threads, set to the case's thread count.
//
// Built only when pkg-config finds OpenBLAS (`openblas`, else a generic `cblas`): the
// CMakeLists defines MHB_HAVE_CBLAS (and MHB_HAVE_OPENBLAS for OpenBLAS's thread control).
// Without it blas_available() is false and the suite registers no baseline case.
#ifndef MH_BENCH_BLAS_BASELINE_H
#define MH_BENCH_BLAS_BASELINE_H

#include <cstddef>
#include <string>

#include "multihead.h"

namespace mhb {

struct LayerWeights;

bool blas_available();
std::string blas_description();  // e.g. "OpenBLAS 0.3.21 ... (openblas_get_config)"
void blas_set_threads(int threads);  // 0 = every processor

// Floats of scratch blas_attention needs (one head's score block).
size_t blas_attention_scratch_floats(const mh_attn_problem& p);
// p must have f32 K and V; writes p.o.
void blas_attention(const mh_attn_problem& p, bool causal, float* scratch);

// Floats of scratch blas_layer_forward needs.
size_t blas_layer_scratch_floats(const LayerWeights& w, int batch, int n_q, int n_kv);
// out [B, N, d_model] = the layer on xq [B, N, d_model], xk [B, M, kdim], xv [B, M, vdim].
void blas_layer_forward(const LayerWeights& w, int batch, int n_q, int n_kv, const float* xq, const float* xk,
                        const float* xv, bool causal, float* out, float* scratch);

}  // namespace mhb

#endif
