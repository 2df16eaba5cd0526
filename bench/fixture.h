// The case fixtures' common part (cases.cc describes the fixtures and defines every counter):
// the Fixture base class every case's fixture derives from, the helpers they share (inputs'
// seeds, causal pair counts, the base layer, the rotation pool), and the factories of the
// fixture kinds: the attention core (core_fixture.cc) and the layer API (layer_fixtures.cc).
#ifndef MH_BENCH_FIXTURE_H
#define MH_BENCH_FIXTURE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "cases.h"
#include "model.h"

namespace mhb {

// The options of the suite being run (set by make_suite / register_cases, cases.cc).
const SuiteOptions& suite_options();

// The oracle evaluates everything when it costs at most this many multiply-adds.
constexpr double kOracleBudgetMacs = 1.5e8;
// Seeds of the counter-based inputs (any fixed values).
constexpr uint64_t kSeedQ = 0x51, kSeedK = 0x4b, kSeedV = 0x56, kSeedX = 0x58, kSeedKV = 0x4b56;

// Kept (query, key) pairs per (batch, head) for causal attention with the N queries at the end
// of the M keys (q_offset = MH_Q_OFFSET_END).
double causal_pairs(int n_q, int n_kv);
// `count` indices spread over [0, n) (first and last included), ascending, distinct.
std::vector<int> spread(int n, int count);
// Overlapping heads' halo o for the case's variant and D (0 for disjoint heads).
int case_halo(const CaseSpec& c);
// The base layer of a layer-API case: the --weights file, or a seeded MHA layer of the case's
// shape (no bias, as LLaMA-style layers; cached).
const LayerWeights& base_layer(const CaseSpec& c);
// K/V heads of the base layer (H for the seeded one).
int base_kv_heads(const CaseSpec& c);

// The decode cases' rotation pool: one allocation kept for the whole run, grown when a case
// needs more; its size now.
uint8_t* rotation_pool(size_t bytes);
size_t rotation_pool_size();
// Frees the pool and the stored base outputs (the end of the run).
void release_shared_buffers();

class Fixture {
public:
    explicit Fixture(const CaseSpec& c);
    virtual ~Fixture() = default;

    // nested: built only to produce the base output for another case's distance from it.
    void setup(bool nested = false);
    virtual void run(benchmark::State& st) = 0;
    const std::string& error() const { return error_; }

protected:
    virtual bool do_setup() = 0;

    // A library error. An int8 case on a library that refuses int8 K/V altogether
    // (int8_refusal) is reported as skipped, with the reason, never as a result.
    bool fail(const char* what, mh_status s);
    bool fail(const std::string& what) {
        error_ = what;
        return false;
    }
    bool make_context();
    double active() const { return variant_ ? variant_->active_heads : 1.0; }
    // The distance of this case's output from the base layer's on the same inputs.
    void set_base_distance(const float* out, size_t n);
    // Sets every counter. flops, bytes and tokens are totals over this call's iterations.
    void report(benchmark::State& st, double flops, double bytes, double tokens) const;

    CaseSpec c_;
    int kv_;
    const VariantSpec* variant_;
    ContextPtr ctx_;
    std::string error_;
    ErrorStats err_;
    bool nested_ = false, cold_ = false;
    double setup_s_ = 0, checked_fraction_ = 0, dist_from_base_ = -1, working_set_bytes_ = 0;
    double q_err_ = -1;  // int8: rel-L2 of the output against the same call on f32 K/V; else -1
    size_t rss0_ = 0, pool0_ = 0;
    size_t workspace_bytes_ = 0, weights_bytes_ = 0, kv_bytes_per_token_ = 0;
};

// The fixture of a case (cases.cc: by mode and API), and of each kind.
std::unique_ptr<Fixture> make_fixture(const CaseSpec& c);
std::unique_ptr<Fixture> make_core_fixture(const CaseSpec& c);          // prefill/decode on the core
std::unique_ptr<Fixture> make_forward_fixture(const CaseSpec& c);       // layer, cross, prefill _dm
std::unique_ptr<Fixture> make_decode_layer_fixture(const CaseSpec& c);  // decode _dm

}  // namespace mhb

#endif
