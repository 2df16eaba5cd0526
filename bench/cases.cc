// The cases: names, the fixture of the running case, registration with Google Benchmark, and
// the definition of every counter (below). The fixtures are in fixture.h (their base class),
// core_fixture.cc and layer_fixtures.cc; the suites in suites.cc; the counters are set by
// Fixture::report (fixture.cc).
//
// Every case owns a fixture: inputs, library objects, workspace, and the accuracy numbers from
// one untimed call compared with the double oracle (reference.cc). Google Benchmark calls a
// case's function several times (to pick an iteration count, then the measured run) and runs all
// calls of one case before the next, so the fixture is built on the first call, kept while the
// same case runs and freed when the next case starts: setup, oracle and the distance from the
// base are paid once per case and only one case's buffers are alive at a time. Every case times
// wall-clock (UseRealTime): the library runs its own worker threads. A case runs 3 repetitions
// and reports their median (Google Benchmark's median aggregate, with the cv aggregate beside
// it), fewer when its calls are long enough to average out interruptions by themselves
// (case_repetitions).
//
// Inputs are counter-based random numbers (hash_uniform), so every variant of a shape sees the
// same data: the core modes draw MHA K/V heads and give a variant with fewer K/V heads the mean
// of each group (what mean-pooling the K/V projection heads gives when there is no bias); the
// layer modes derive the variant's weights from the base MHA layer (model.h: pool_kv_heads).
//
// Counters (every case has all of them; rates are per second of wall time):
//   gflops        useful FLOPs / s. Attention: 2*Dqk + 2*Dv per (query, kept key) pair per
//                 active head, counting only the pairs causality keeps (causal prefill: about
//                 half of N*M). Projections: 2*rows*in*out each (Q and O over the N queries, K
//                 and V over the M key/value rows). Softmax, scaling, bias: not counted.
//                 Overlapping heads: Dqk = Dv = D + 2o, and W' has H*(D + 2o) inputs.
//   pct_peak      gflops as % of the measured multiply-add peak for the case's ISA and thread
//                 count (machine_limits.cc); the openblas baseline against the best ISA's peak.
//   gbps          bytes / s. decode: the bytes a token must read, K/V of every cached key
//                 (B*M*kv_bytes_per_token: int8 counts its values and its scales), plus the packed weights
//                 (mh_layer_weights_bytes) for decode through the layer. Other modes: the bytes
//                 the call must move at least once, inputs read plus output written (prefill:
//                 Q, K, V, O; layer/cross: the four weight matrices in float, the inputs and the
//                 output); gflops / gbps is the arithmetic intensity of the roofline.
//   pct_bw        gbps as % of the measured streaming read bandwidth for the thread count. That
//                 is a DRAM figure: data the LLC holds can exceed 100%. The decode core cases
//                 therefore rotate through enough copies of K/V (counter `cold` = 1) that each
//                 call reads its K/V from DRAM, as a model whose other layers evict the cache
//                 would; decode through the layer reuses its one cache (cold = 0), compare
//                 working_set_bytes with the LLC (context llc_bytes).
//   tokens_per_s  query tokens / s (B*N per call; decode: B per call).
//   weights_bytes mh_layer_weights_bytes (the openblas baseline: its float weights); 0 on the
//                 attention core, which has no weights.
//   kv_bytes_per_token  K+V bytes one token adds to a cache: Hkv*(Dqk+Dv)*sizeof(kvdtype), int8
//                 plus 4 bytes per (K or V) row for its f32 scale: Hkv*(Dqk+Dv) + 8*Hkv
//                 (mh_kv_cache_bytes_per_token for decode through the layer; overlapping
//                 heads: 2*(H*D + 2o)*sizeof(kvdtype), the padded rows the cache holds, int8
//                 with one scale per row: + 8).
//   x_bound       the time over the case's bound max(bytes / bandwidth, FLOPs / peak), with the
//                 bytes of gbps and the FLOPs of gflops against the ceilings of pct_bw and
//                 pct_peak: 1 = at the limit (0 when a ceiling was not measured).
//   q_err         int8 K/V only (else -1): the relative L2 distance of the output from the same
//                 call on f32 K/V of the same unquantised values (the core: mh_attention on f32
//                 K/V in the same layout; through the layer: the checked token's decode on an f32
//                 cache filled with the same prompt), the error the quantisation adds.
//   workspace_bytes  what the *_workspace_size call asked for (openblas: its scratch).
//   peak_rss_bytes  RSS growth of the case: the peak resident set (VmHWM, reset through
//                 /proc/self/clear_refs when the case starts) minus the resident set before its
//                 fixture was built. It covers inputs, copies, library objects, workspace and the
//                 oracle's temporaries. Without clear_refs it is the process peak (ru_maxrss)
//                 minus that start value (context peak_rss_method says which).
//   max_abs_err, rel_l2_err  vs the double oracle on the same inputs, over the checked part of
//                 the output (the core reads int8 as its dequantised values, scale * q): all of it
//                 when the oracle is cheap, else a sub-slice (4 heads
//                 spread over H and/or 32 query rows spread over N, first and last included);
//                 ref_checked_fraction is the fraction checked. Decode through the layer checks
//                 the output of the last prompt token after the cache is filled, against the
//                 oracle's causal layer on the float inputs: with an f16/bf16 cache the error
//                 includes the cache's storage rounding (~1e-4), which the core cases, whose
//                 oracle reads the stored K/V, do not see.
//   dist_from_base  ||y - y_base|| / ||y_base||, the relative L2 distance between this case's
//                 output and the base layer's (mha; the loaded layer with --weights) on the same
//                 inputs: what the variant gives up in accuracy (0 = the same output; higher is
//                 further away). Over the whole output, or up to 2^20 evenly strided elements
//                 of it. 0 for the base itself on its first ISA; -1 when there is no base output.
//   working_set_bytes  the bytes one call touches (one copy of K/V, inputs, output, weights).
//                 The decode rotation copies beyond the first live in a pool allocated once
//                 for the run and are not part of any case's peak_rss_bytes.
//   cold          1 if the timed calls read K/V from beyond the LLC (rotating copies).
//   setup_s       seconds spent building the case, its oracle and its distance from the base (not timed).
//   kv_len        decode only: mean number of keys attended per timed token.
#include "cases.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include <benchmark/benchmark.h>

#include "fixture.h"
#include "machine_limits.h"
#include "model.h"
#include "suites.h"

namespace mhb {
namespace {

SuiteOptions g_opt;
std::function<void(const std::string&)> g_start_hook;

// The one live fixture (--mh_interleave: one per case).
std::string g_current_name;
std::unique_ptr<Fixture> g_current;
// --mh_interleave: repetitions of different cases alternate, so each case's fixture (a filled
// KV cache, packed layers) is kept for its next repetition instead of being rebuilt.
std::map<std::string, std::unique_ptr<Fixture>> g_kept;

void run_case(const CaseSpec& c, const std::string& name, benchmark::State& st) {
    if (g_opt.interleave && g_current_name != name) {
        if (g_current) g_kept[g_current_name] = std::move(g_current);
        auto kept = g_kept.find(name);
        if (kept != g_kept.end()) {
            g_current = std::move(kept->second);
            g_current_name = name;
            g_kept.erase(kept);
        }
    }
    if (!g_current || g_current_name != name) {
        g_current.reset();  // free the previous case first
        if (g_start_hook) g_start_hook(name);
        g_current = make_fixture(c);
        g_current_name = name;
        g_current->setup();
    }
    if (!g_current->error().empty()) {
        st.SkipWithError(g_current->error().c_str());
        return;
    }
    g_current->run(st);
}

}  // namespace

const char* mode_name(Mode mode) {
    switch (mode) {
    case Mode::Prefill: return "prefill";
    case Mode::Decode: return "decode";
    case Mode::Layer: return "layer";
    case Mode::Cross: return "cross";
    }
    return "unknown";
}

int case_kv_heads(const CaseSpec& c) {
    const VariantSpec* v = find_variant(c.variant);
    if (!v) return 0;
    if (!is_layer_api(c) && !v->core) return 0;
    if (c.mode == Mode::Cross && v->self_only) return 0;
    return v->kv_heads(c.n_heads, base_kv_heads(c));
}

std::string case_name(const CaseSpec& c) {
    std::string shape = c.batch > 1 ? "B" + std::to_string(c.batch) + "_" : "";
    if (c.mode != Mode::Decode) shape += "N" + std::to_string(c.n_q) + "_";
    shape += "M" + std::to_string(c.n_kv) + "_H" + std::to_string(c.n_heads) + "_D" + std::to_string(c.head_dim);
    if (c.d_model > 0) shape += "_dm" + std::to_string(c.d_model);
    if (c.token_major) shape += "_tokmajor";
    if (c.kv_block > 0) shape += "_paged" + std::to_string(c.kv_block);
    const std::string isa = c.impl == Impl::Blas ? "openblas" : kernel_label(c.isa, c.compute);
    return std::string(mode_name(c.mode)) + "/" + c.variant + "/" + shape + "/" + dtype_name(c.kv_dtype) + "/" + isa +
           "/threads:" + std::to_string(c.threads);
}

std::unique_ptr<Fixture> make_fixture(const CaseSpec& c) {
    switch (c.mode) {
    case Mode::Prefill: return is_layer_api(c) ? make_forward_fixture(c) : make_core_fixture(c);
    case Mode::Decode: return is_layer_api(c) ? make_decode_layer_fixture(c) : make_core_fixture(c);
    case Mode::Layer:
    case Mode::Cross: return make_forward_fixture(c);
    }
    return nullptr;
}

const SuiteOptions& suite_options() { return g_opt; }

std::vector<CaseSpec> make_suite(const SuiteOptions& o) {
    g_opt = o;
    return o.quick ? quick_suite(o) : default_suite(o);
}

int repetitions(const SuiteOptions& o) { return o.repetitions > 0 ? o.repetitions : (o.quick ? 1 : 3); }

namespace {
// A rough time per call, from the useful FLOPs and a modest rate per implementation.
double estimated_seconds(const CaseSpec& c) {
    const double H = c.n_heads, D = c.head_dim + 2 * case_halo(c), N = c.n_q, M = c.n_kv, B = c.batch;
    double flops = B * causal_pairs(c.n_q, c.n_kv) * H * 4 * D;
    if (c.mode == Mode::Layer || c.mode == Mode::Cross) flops = B * N * M * H * 4 * D;
    if (c.mode != Mode::Decode && is_layer_api(c)) {  // plus the projections (prefill: causal attention)
        const double dm = c.d_model;
        flops += B * (2 * N * dm * H * D * 2 + 2 * M * dm * H * D * 2);
    }
    const double rate = c.impl == Impl::Blas ? 30e9 : c.isa == MH_ISA_SCALAR ? 3e9 : 60e9;
    return flops / rate / std::max(1, c.threads);
}

// Seconds per repetition (Google Benchmark's MinTime), for the cases that are not run for a
// fixed iteration count.
double case_min_time(const SuiteOptions& o) { return o.min_time > 0 ? o.min_time : (o.quick ? 0.02 : 0.1); }

bool fixed_iterations(const CaseSpec& c) { return c.mode == Mode::Decode && is_layer_api(c); }

// Repetitions of one case: a call that takes a large fraction of a second averages over the
// scheduler's interruptions by itself, and the steady cases (the default suite's cv is 0-3%
// on them) need no third one: one repetition (no cv) above a tenth of a second, two above a
// hundredth, else the suite's count.
int case_repetitions(const CaseSpec& c, const SuiteOptions& o) {
    const int reps = repetitions(o);
    if (o.interleave || o.repetitions > 0) return reps;
    const double t = estimated_seconds(c);
    if (t > 0.1) return 1;
    if (t > 0.01) return std::min(reps, 2);
    return reps;
}
}  // namespace

std::string registered_name(const CaseSpec& c, const SuiteOptions& o) {
    char run[64];
    if (fixed_iterations(c))
        std::snprintf(run, sizeof run, "/iterations:%d", c.iterations);
    else
        std::snprintf(run, sizeof run, "/min_time:%0.3f", case_min_time(o));
    std::string n = case_name(c) + run;
    const int reps = case_repetitions(c, o);
    if (reps > 1) n += "/repeats:" + std::to_string(reps);
    return n + "/real_time";
}

double expected_case_seconds(const CaseSpec& c, const SuiteOptions& o) {
    const double call = estimated_seconds(c), reps = case_repetitions(c, o);
    const double B = c.batch, H = c.n_heads, D = c.head_dim, M = c.n_kv;
    // Setup, with rates measured on the default suite (2 cores, AMD Zen 4): the layer modes'
    // oracle projects every row in double precision, about 4e9 multiply-adds/s for the GQA
    // family's and 0.45e9 for the other variants' (naive) oracles; the core modes draw K/V at
    // about 1.5e8 elements/s.
    double setup = 0.05 + 3 * call;
    if (is_layer_api(c)) {
        const VariantSpec* v = find_variant(c.variant);
        const bool gqa_family = v && (v->family == MH_VARIANT_MHA || v->family == MH_VARIANT_GQA || v->family == MH_VARIANT_MQA);
        const double rows = c.mode == Mode::Decode ? M : c.n_q + M;
        setup += B * rows * c.d_model * H * D / (gqa_family ? 4e9 : 0.45e9);
    } else {
        // int8: also quantised and kept in f32, about twice the drawing time
        setup += B * M * H * D * 2 / (c.kv_dtype == MH_DTYPE_I8 ? 0.75e8 : 1.5e8);
    }
    if (fixed_iterations(c)) {
        // the cache is filled through the layer first: a causal prefill of M tokens (int8: a
        // second, f32 cache too, for q_err)
        CaseSpec fill = c;
        fill.n_q = c.n_kv;
        const double fills = c.kv_dtype == MH_DTYPE_I8 ? 2 : 1;
        return setup + fills * estimated_seconds(fill) + reps * c.iterations * call;
    }
    return setup + reps * std::max(call, case_min_time(o));
}

void register_cases(const std::vector<CaseSpec>& cases, const SuiteOptions& o) {
    g_opt = o;
    // Each case runs case_repetitions() repetitions (the first also picks the iteration count)
    // and reports their median: one interrupted repetition on a shared machine does not move
    // the result, and the cv aggregate shows how steady the case was.
    for (const CaseSpec& c : cases) {
        const int reps = case_repetitions(c, o);
        const std::string name = case_name(c);
        benchmark::internal::Benchmark* b =
            benchmark::RegisterBenchmark(name.c_str(), [c, name](benchmark::State& st) { run_case(c, name, st); });
        b->UseRealTime()->Unit(benchmark::kMillisecond);
        if (fixed_iterations(c))
            b->Iterations(c.iterations);
        else
            b->MinTime(case_min_time(o));
        if (reps > 1) b->Repetitions(reps)->ReportAggregatesOnly(true);
    }
}

void set_case_start_hook(std::function<void(const std::string&)> hook) { g_start_hook = std::move(hook); }

void release_fixtures() {
    g_current.reset();
    g_kept.clear();
    g_current_name.clear();
    release_shared_buffers();
}

}  // namespace mhb
