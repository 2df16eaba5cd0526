// The benchmark cases: what is measured (CaseSpec), the suites, and their registration with
// Google Benchmark. Names read mode/variant/shape/kv-dtype/isa/threads:T, e.g.
//   prefill/gqa8/N512_M512_H32_D128/f32/scalar/threads:1
#ifndef MH_BENCH_CASES_H
#define MH_BENCH_CASES_H

#include <string>
#include <vector>

#include "multihead.h"

namespace mhb {

enum class Mode {
    Prefill,     // mh_attention, causal, N queries at the end of M = N keys
    Layer,       // mh_layer_forward, causal self-attention over N tokens
    Decode,      // mh_attention with N = 1 over M keys: the decode core
    DecodeLayer  // mh_layer_decode of 1 token against a KV cache holding M tokens
};

struct CaseSpec {
    Mode mode = Mode::Prefill;
    int batch = 1;
    int n_q = 1;         // N (1 for the decode modes)
    int n_kv = 1;        // M: keys (prefill: = N; decode: tokens already cached)
    int n_heads = 1;     // H
    int n_kv_heads = 1;  // Hkv; the variant label follows from H / Hkv
    int head_dim = 64;   // D (= Dv)
    mh_dtype kv_dtype = MH_DTYPE_F32;
    mh_isa isa = MH_ISA_SCALAR;
    int threads = 1;
    int iterations = 0;  // DecodeLayer only: fixed iteration count (see cases.cc)
};

const char* mode_name(Mode mode);
std::string variant_name(const CaseSpec& c);  // mha, gqa<Hkv>, mqa
std::string case_name(const CaseSpec& c);

// The default suite (sized for the scalar kernels on a small machine) or the quick one (tiny
// shapes, well under a minute), for every ISA this library and CPU support.
std::vector<CaseSpec> make_suite(bool quick);
// Registers every case; quick also shortens the minimum time per case.
void register_cases(const std::vector<CaseSpec>& cases, bool quick);
// Frees the one case's buffers still held (call after RunSpecifiedBenchmarks).
void release_fixtures();

}  // namespace mhb

#endif
