// The benchmark cases: what is measured (CaseSpec), the suites, and their registration with
// Google Benchmark. Names read  mode/variant/shape/kvdtype/isa/threads:T, e.g.
//   prefill/gqa8/N2048_M2048_H32_D128/f32/avx512/threads:1
//   decode/mqa/M32768_H32_D128/f16/avx512/threads:1
//   decode/gqa4/M4096_H16_D64_dm1024/f16/avx512/threads:1
//   decode/mha/M32768_H32_D128/i8/avx2/threads:1
//   decode/mha/M32768_H32_D128_tokmajor/f16/avx512/threads:1
//   decode/mha/M32768_H16_D64_dm1024_paged256/f16/avx512/threads:1
//   layer/mha/N512_M512_H16_D64_dm1024/f32/openblas/threads:1
//   prefill/mha/N512_M512_H32_D128_dm4096/f32/avx512/threads:1
//   cross/gqa8/N448_M1500_H16_D64_dm1024/f32/scalar/threads:1
// mode     prefill  causal self-attention over N prompt tokens, on the attention core
//                   (mh_attention; Q/K/V token-major as projections produce them) or, when the
//                   shape ends in _dm<d_model>, through the whole layer (mh_layer_forward, causal;
//                   less the core case of its shape: the projection GEMMs, report_targets.py)
//          decode   one new token per sequence against M cached tokens: on the attention core
//                   (mh_attention on cache-layout K/V, head-major [B][Hkv][M][D] with a padded
//                   head stride) or, when the shape ends in _dm<d_model>, through the whole
//                   layer with its KV cache (mh_layer_decode)
//          layer    an encoder layer: mh_layer_forward, full (non-causal) self-attention, N = M
//          cross    mh_layer_forward with key/value inputs of another length M (cross-attention)
// variant  a row of the variant table (model.h): mha, gqa8, gqa4, mqa
// shape    [B<batch>_][N<queries>_]M<keys>_H<heads>_D<head dim>[_dm<d_model>][_tokmajor][_paged<T>];
//          _dm marks the layer API (projections included, d_model = the layer's width); _tokmajor
//          a decode core case on a token-major cache (CaseSpec::token_major); _paged a layer
//          decode on a paged KV cache of T-token blocks (CaseSpec::kv_block)
// kvdtype  K/V storage: the K/V tensors (core) or the KV cache (decode _dm): f32, f16, bf16, or
//          i8 (symmetric int8 with one f32 scale per (token, K/V head) row); f32 for layer and
//          cross, whose forward keeps K/V in float
// isa      the kernel table (scalar, avx2, avx512, neon, sve), or "openblas" for the baseline
//          written with cblas_sgemm (blas_baseline.h); "+bf16" after it: the bf16 compute mode
//          (mh_compute, the attention GEMMs on bf16 operands), e.g. avx512+bf16; none: f32
#ifndef MH_BENCH_CASES_H
#define MH_BENCH_CASES_H

#include <functional>
#include <string>
#include <vector>

#include "multihead.h"

namespace mhb {

struct LayerWeights;

enum class Mode { Prefill, Decode, Layer, Cross };
enum class Impl { Library, Blas };

struct CaseSpec {
    Mode mode = Mode::Prefill;
    std::string variant = "mha";
    int batch = 1;
    int n_q = 1;        // N (1 for decode)
    int n_kv = 1;       // M: keys (prefill/layer: = N; decode: tokens already cached)
    int n_heads = 1;    // H
    int head_dim = 64;  // D (= Dv)
    int d_model = 0;    // > 0: the layer API (projections included); 0: the attention core
    mh_dtype kv_dtype = MH_DTYPE_F32;
    mh_isa isa = MH_ISA_SCALAR;
    Impl impl = Impl::Library;
    int threads = 1;
    int iterations = 0;  // decode through the layer: the fixed iteration count
    // Decode on the core: K/V token-major [B][M][Hkv][D] (an engine's own cache read in place,
    // stride_token = Hkv*D, stride_head = D) instead of the library's head-major cache layout.
    // The shape in the case name ends in _tokmajor.
    bool token_major = false;
    // Decode through the layer: > 0, a paged KV cache of blocks of this many tokens (its
    // default pool) instead of the contiguous one. The shape ends in _paged<kv_block>.
    int kv_block = 0;
    // The compute mode of the attention GEMMs (core: mh_attn_options.compute; layers:
    // mh_layer_config.compute); not f32: the isa in the case name reads <isa>+<mode>.
    mh_compute compute = MH_COMPUTE_F32;
};

struct SuiteOptions {
    bool quick = false;
    bool long_tails = false;               // --mh_long: also the long tails (4K prefill/layers, 16K-32K layer decode)
    int threads = 0;                        // > 0: every case at this thread count
    const LayerWeights* file_layer = nullptr;  // --weights: the layer modes use it as the base
    double min_time = 0.0;                  // seconds per repetition; 0 = the suite's default
    int repetitions = 0;                    // per case (median reported); 0 = 3, quick 1
    bool interleave = false;                // --mh_interleave: every case's fixture stays alive
};

const char* mode_name(Mode mode);
// The layer API (projections included) rather than the attention core.
inline bool is_layer_api(const CaseSpec& c) { return c.d_model > 0; }
std::string case_name(const CaseSpec& c);
// K/V heads of the case's variant (0 = the variant does not apply to this shape).
int case_kv_heads(const CaseSpec& c);

std::vector<CaseSpec> make_suite(const SuiteOptions& o);
// Repetitions per case the options ask for (the median is reported).
int repetitions(const SuiteOptions& o);
void register_cases(const std::vector<CaseSpec>& cases, const SuiteOptions& o);
// The full name register_cases() gives the case in Google Benchmark (what --benchmark_filter
// matches: the case name plus /min_time:X or /iterations:N, /repeats:R, /real_time).
std::string registered_name(const CaseSpec& c, const SuiteOptions& o);
// A rough cost of the case in seconds (setup and timed runs), for the time-left estimate.
double expected_case_seconds(const CaseSpec& c, const SuiteOptions& o);
// Called with the case name when a case starts (its fixture is being built).
void set_case_start_hook(std::function<void(const std::string&)> hook);
// Frees the one case's buffers still held (call after RunSpecifiedBenchmarks).
void release_fixtures();

}  // namespace mhb

#endif
