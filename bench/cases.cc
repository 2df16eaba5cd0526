// Case fixtures, the suites, and registration.
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
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <thread>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "blas_baseline.h"
#include "core_kv.h"
#include "machine_limits.h"
#include "model.h"
#include "oracle_moh.h"
#include "reference.h"

namespace mhb {
int repetitions(const SuiteOptions& o);
namespace {

using benchmark::Counter;

SuiteOptions g_opt;
std::function<void(const std::string&)> g_start_hook;

// The oracle evaluates everything when it costs at most this many multiply-adds.
constexpr double kOracleBudgetMacs = 1.5e8;
constexpr size_t kBaseDistanceSamples = size_t{1} << 20;

// Seeds of the counter-based inputs (any fixed values).
constexpr uint64_t kSeedQ = 0x51, kSeedK = 0x4b, kSeedV = 0x56, kSeedX = 0x58, kSeedKV = 0x4b56;

// Kept (query, key) pairs per (batch, head) for causal attention with the N queries at the end
// of the M keys (q_offset = MH_Q_OFFSET_END).
double causal_pairs(int n_q, int n_kv) {
    double pairs = 0;
    for (int i = 0; i < n_q; i++) {
        const long keep = std::min<long>(static_cast<long>(n_kv) - n_q + i + 1, n_kv);
        if (keep > 0) pairs += static_cast<double>(keep);
    }
    return pairs;
}

// `count` indices spread over [0, n) (first and last included), ascending, distinct.
std::vector<int> spread(int n, int count) {
    std::vector<int> v;
    if (count >= n) {
        for (int i = 0; i < n; i++) v.push_back(i);
        return v;
    }
    for (int r = 0; r < count; r++)
        v.push_back(count == 1 ? 0 : static_cast<int>(static_cast<long>(r) * (n - 1) / (count - 1)));
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

std::vector<float> sample_output(const float* o, size_t n) {
    const size_t stride = std::max<size_t>(1, (n + kBaseDistanceSamples - 1) / kBaseDistanceSamples);
    std::vector<float> s;
    s.reserve(n / stride + 1);
    for (size_t i = 0; i < n; i += stride) s.push_back(o[i]);
    return s;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < got.size() && i < ref.size(); i++) {
        const double d = static_cast<double>(got[i]) - ref[i];
        d2 += d * d;
        r2 += static_cast<double>(ref[i]) * ref[i];
    }
    if (got.size() != ref.size() || !std::isfinite(d2)) return std::numeric_limits<double>::infinity();
    return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

// ------------------------------------------------------------------ models
bool is_layer_api(const CaseSpec& c) { return c.d_model > 0; }

// Overlapping heads' halo o for the case's variant and D (0 for disjoint heads).
int case_halo(const CaseSpec& c) {
    const VariantSpec* v = find_variant(c.variant);
    return v ? c.head_dim * v->halo_pct / 100 : 0;
}

// The base layer of a layer-API case: the --weights file, or a seeded MHA layer of the case's
// shape (no bias, as LLaMA-style layers; cached).
const LayerWeights& base_layer(const CaseSpec& c) {
    if (g_opt.file_layer) return *g_opt.file_layer;
    static std::map<std::string, LayerWeights> cache;
    const std::string key = std::to_string(c.d_model) + "/" + std::to_string(c.n_heads) + "/" + std::to_string(c.head_dim);
    auto it = cache.find(key);
    if (it == cache.end()) {
        if (cache.size() > 4) cache.clear();  // bound what is kept (the suite is grouped by shape)
        it = cache.emplace(key, random_mha_layer(c.d_model, c.n_heads, c.head_dim, c.d_model, false,
                                                 0x4d48ull * 1000003u + static_cast<uint64_t>(c.d_model) * 131u + c.n_heads))
                 .first;
    }
    return it->second;
}

int base_kv_heads(const CaseSpec& c) {
    return is_layer_api(c) && g_opt.file_layer ? g_opt.file_layer->n_kv_heads : c.n_heads;
}

std::string base_variant(const CaseSpec& c) {
    const int base_kv = base_kv_heads(c);
    for (const VariantSpec& v : variant_table())
        if (v.kv_heads(c.n_heads, base_kv) == base_kv) return v.name;
    return "";
}

// The key the base output is stored under: mode, shape and K/V dtype (not the ISA, threads,
// implementation or K/V layout, which must not change the output beyond rounding).
std::string base_output_key(CaseSpec c) {
    c.token_major = false;
    const std::string n = case_name(c);
    // mode/variant/shape/dtype/isa/threads:T -> mode/shape/dtype
    std::vector<std::string> parts;
    size_t a = 0;
    for (size_t b; (b = n.find('/', a)) != std::string::npos; a = b + 1) parts.push_back(n.substr(a, b - a));
    parts.push_back(n.substr(a));
    return parts[0] + "/" + parts[2] + "/" + parts[3];
}

std::map<std::string, std::vector<float>> g_base_outputs;

// The decode cases' rotation pool: one allocation (plain aligned, like the library's KV cache),
// kept for the whole run and grown when a case needs more (with an eighth to spare, so a case
// slightly larger than the last, e.g. overlapping heads' padded rows after MHA, fits).
AlignedBuffer g_pool;
uint8_t* rotation_pool(size_t bytes) {
    if (g_pool.size() < bytes) {
        g_pool = AlignedBuffer();
        g_pool = AlignedBuffer(bytes + bytes / 8);
        std::memset(g_pool.data(), 0, g_pool.size());  // fault it in once
    }
    return g_pool.as<uint8_t>();
}

// ------------------------------------------------------------------ fixture base
class Fixture;
std::unique_ptr<Fixture> make_fixture(const CaseSpec& c);

class Fixture {
public:
    explicit Fixture(const CaseSpec& c) : c_(c), kv_(case_kv_heads(c)), variant_(find_variant(c.variant)) {}
    virtual ~Fixture() = default;

    // nested: built only to produce the base output for another case's distance from it.
    void setup(bool nested = false) {
        nested_ = nested;
        const auto t0 = std::chrono::steady_clock::now();
        if (!nested) {
            rss0_ = current_rss_bytes();
            pool0_ = g_pool.size();
            reset_peak_rss();
        }
        try {
            if (!variant_ || kv_ <= 0) error_ = "variant " + c_.variant + " does not apply to this shape";
            else do_setup();
        } catch (const std::bad_alloc&) {
            error_ = "out of memory in the benchmark's own setup";
        }
        setup_s_ = seconds_since(t0);
    }
    virtual void run(benchmark::State& st) = 0;
    const std::string& error() const { return error_; }

protected:
    virtual bool do_setup() = 0;

    // A library error. An int8 case on a library that refuses int8 K/V altogether
    // (int8_refusal) is reported as skipped, with the reason, never as a result.
    bool fail(const char* what, mh_status s) {
        error_ = std::string(what) + ": " + mh_status_string(s);
        if (c_.kv_dtype == MH_DTYPE_I8 && !int8_refusal().empty())
            error_ = "skipped: this library does not accept int8 K/V (" + int8_refusal() + ")" +
                     (error_ == int8_refusal() ? "" : "; here " + error_);
        return false;
    }
    bool fail(const std::string& what) {
        error_ = what;
        return false;
    }

    bool make_context() {
        mh_context_config cfg = mh_context_config_default();
        cfg.num_threads = c_.threads;
        cfg.isa = c_.isa;
        mh_context* ctx = nullptr;
        const mh_status s = mh_context_create(&cfg, &ctx);
        if (s != MH_OK) return fail("mh_context_create", s);
        ctx_.reset(ctx);
        return true;
    }

    double active() const { return variant_ ? variant_->active_heads : 1.0; }

    // The distance of this case's output from the base layer's on the same inputs.
    void set_base_distance(const float* out, size_t n) {
        const std::string key = base_output_key(c_);
        std::vector<float> mine = sample_output(out, n);
        const bool base = c_.variant == base_variant(c_);
        auto it = g_base_outputs.find(key);
        if (it == g_base_outputs.end() && base && c_.impl == Impl::Library) {
            g_base_outputs[key] = std::move(mine);
            dist_from_base_ = 0.0;
            return;
        }
        if (it == g_base_outputs.end() && !nested_) {
            // the base case did not run first (e.g. a --filter): build it now, untimed
            CaseSpec b = c_;
            b.variant = base_variant(c_);
            b.impl = Impl::Library;
            if (c_.impl != Impl::Library) mh_isa_default(&b.isa);
            if (!b.variant.empty()) {
                std::unique_ptr<Fixture> f = make_fixture(b);
                f->setup(true);
            }
            it = g_base_outputs.find(key);
        }
        dist_from_base_ = it == g_base_outputs.end() ? -1.0 : rel_l2(mine, it->second);
    }

    // Sets every counter. flops, bytes and tokens are totals over this call's iterations.
    void report(benchmark::State& st, double flops, double bytes, double tokens) const {
        const MachineLimits& lim = machine_limits();
        double peak = 0;
        if (c_.impl == Impl::Blas) {
            for (int i = 1; i < MH_ISA_COUNT; i++) peak = std::max(peak, lim.peak(static_cast<mh_isa>(i), c_.threads));
        } else {
            peak = lim.peak(c_.isa, c_.threads);
        }
        const double bw = lim.bandwidth(c_.threads);
        st.counters["gflops"] = Counter(flops * 1e-9, Counter::kIsRate);
        st.counters["pct_peak"] = Counter(peak > 0 ? 100.0 * flops * 1e-9 / peak : 0.0, Counter::kIsRate);
        st.counters["gbps"] = Counter(bytes * 1e-9, Counter::kIsRate);
        st.counters["pct_bw"] = Counter(bw > 0 ? 100.0 * bytes * 1e-9 / bw : 0.0, Counter::kIsRate);
        // the time over its bound max(bytes / bandwidth, FLOPs / peak): rate then inverted
        const double bound_s = std::max(bw > 0 ? bytes * 1e-9 / bw : 0.0, peak > 0 ? flops * 1e-9 / peak : 0.0);
        st.counters["x_bound"] = bound_s > 0 ? Counter(bound_s, Counter::kIsRate | Counter::kInvert) : Counter(0.0);
        st.counters["tokens_per_s"] = Counter(tokens, Counter::kIsRate);
        st.counters["weights_bytes"] = static_cast<double>(weights_bytes_);
        st.counters["kv_bytes_per_token"] = static_cast<double>(kv_bytes_per_token_);
        st.counters["workspace_bytes"] = static_cast<double>(workspace_bytes_);
        // minus what the shared rotation pool grew by during this case (harness, not case, memory)
        const size_t peak_rss = peak_rss_bytes(), base = rss0_ + (g_pool.size() - pool0_);
        st.counters["peak_rss_bytes"] = static_cast<double>(peak_rss > base ? peak_rss - base : 0);
        st.counters["max_abs_err"] = err_.max_abs;
        st.counters["rel_l2_err"] = err_.rel_l2;
        st.counters["ref_checked_fraction"] = checked_fraction_;
        st.counters["dist_from_base"] = dist_from_base_;
        st.counters["q_err"] = q_err_;
        st.counters["working_set_bytes"] = working_set_bytes_;
        st.counters["cold"] = cold_ ? 1.0 : 0.0;
        st.counters["setup_s"] = setup_s_;
    }

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

// ------------------------------------------------------------------ attention core
// prefill: N = M queries, causal, K/V token-major [B, M, Hkv, D] as projections produce them.
// decode: one query at position M - 1 over M keys, K/V head-major [B, Hkv, M, D] with a padded
// head stride (the library's KV cache layout), rotated over copies beyond the LLC (cold).
// Overlapping heads (halo o > 0) read what the layer hands its core: Q/K/V rows of width
// H*D + 2o (MHA's rows at offset o, zero halos), head h's window the D + 2o elements from h*D
// (head stride D); decode K/V one padded stream per token [B, M, H*D + 2o] (the layer's cache);
// the output [B, N, H, D + 2o]. Its distance from the base compares each head's middle D outputs with MHA's.
class CoreFixture : public Fixture {
public:
    using Fixture::Fixture;

    void run(benchmark::State& st) override {
        if (c_.impl == Impl::Blas) blas_set_threads(c_.threads);
        // The copy index carries over between Google Benchmark's calls (iteration search,
        // repetitions): restarting at copy 0 would re-read copies a previous call left in cache.
        for (auto _ : st) {
            if (!call(next_copy_)) {
                st.SkipWithError(error_.c_str());
                break;
            }
            if (++next_copy_ == problems_.size()) next_copy_ = 0;
            benchmark::ClobberMemory();
        }
        const double it = static_cast<double>(st.iterations());
        report(st, flops_ * it, bytes_ * it, static_cast<double>(c_.batch) * c_.n_q * it);
        st.counters["kv_len"] = c_.mode == Mode::Decode ? static_cast<double>(c_.n_kv) : 0.0;
    }

private:
    bool call(size_t ci) {
        if (c_.impl == Impl::Blas) {
            blas_attention(problems_[ci], true, ws_.as<float>());
            return true;
        }
        const mh_status s = mh_attention(ctx_.get(), &problems_[ci], &opt_, ws_.data(), ws_.size());
        if (s != MH_OK) return fail("mh_attention", s);
        return true;
    }

    bool do_setup() override {
        if (c_.impl == Impl::Library && !make_context()) return false;
        const int B = c_.batch, N = c_.n_q, M = c_.n_kv, H = c_.n_heads, Hkv = kv_, D = c_.head_dim;
        const int o = case_halo(c_), Dw = D + 2 * o;  // Dw: the head width the core sees
        const bool decode = c_.mode == Mode::Decode, i8 = c_.kv_dtype == MH_DTYPE_I8;
        const CoreKvLayout lay = core_kv_layout(decode && !c_.token_major, B, M, Hkv, D, o, c_.kv_dtype);
        const size_t copy_bytes = lay.bytes;  // one of K or V
        size_t ncopies = 1;
        const double llc = static_cast<double>(machine_limits().llc_bytes);
        // Interleaved cases are all alive at once: no shared rotation pool, one copy each.
        const bool pooled = decode && !g_opt.quick && !nested_ && !g_opt.interleave;
        if (pooled && llc > 0) {
            ncopies = static_cast<size_t>(std::ceil(2.0 * llc / (2.0 * static_cast<double>(copy_bytes))));
            ncopies = std::min<size_t>(std::max<size_t>(ncopies, 1), 4096);
        }
        cold_ = decode && llc > 0 && 2.0 * static_cast<double>(copy_bytes) * static_cast<double>(ncopies) >= 2.0 * llc;
        // int8: the same values unquantised, in f32, for the quantisation error (q_err); in the
        // rotation pool after the copies when it is this case's (harness memory, faulted in once
        // for the run, as the copies), else in buffers of the case's own
        const CoreKvLayout lay_f = core_kv_layout(decode && !c_.token_major, B, M, Hkv, D, o, MH_DTYPE_F32);
        const size_t f32_stride = i8 ? (lay_f.bytes + 4095) / 4096 * 4096 : 0;
        // Copy 0 is the case's own (counted in its peak_rss_bytes); copies 1.. live in the
        // rotation pool, allocated once for the whole run (page-faulting half a GiB for every
        // case would cost more than the case itself).
        k_ = AlignedBuffer(copy_bytes);
        v_ = AlignedBuffer(copy_bytes);
        const size_t stride = (copy_bytes + 4095) / 4096 * 4096;
        const size_t pool_copies = 2 * stride * (ncopies - 1), pool_f32 = pooled ? 2 * f32_stride : 0;
        uint8_t* pool = pool_copies + pool_f32 > 0 ? rotation_pool(pool_copies + pool_f32) : nullptr;
        auto copy_at = [&](int t, size_t ci) -> uint8_t* {
            if (ci == 0) return static_cast<uint8_t*>(t == 0 ? k_.data() : v_.data());
            return pool + (ci - 1) * 2 * stride + static_cast<size_t>(t) * stride;
        };
        AlignedBuffer own_kf(pool_f32 ? 0 : f32_stride), own_vf(pool_f32 ? 0 : f32_stride);
        void* kf = pool_f32 ? pool + pool_copies : own_kf.data();
        void* vf = pool_f32 ? pool + pool_copies + f32_stride : own_vf.data();

        // K/V: the mean of each group's MHA heads (g = 1: the MHA heads themselves), token by
        // token: row [Hkv*D + 2o], head kvh's values at o + kvh*D.
        const int grp = H / Hkv;
        const bool gaps = lay.elems != static_cast<size_t>(B) * M * lay.streams * static_cast<size_t>(lay.row_len);
        std::vector<float> row(static_cast<size_t>(Hkv) * D + 2 * o, 0.0f);
        for (int t = 0; t < 2; t++) {
            void* dst = t == 0 ? k_.data() : v_.data();
            void* dst_f = t == 0 ? kf : vf;
            const uint64_t seed = t == 0 ? kSeedK : kSeedV;
            if (gaps) std::memset(dst, 0, copy_bytes);  // the pads between streams
            if (i8 && gaps) std::memset(dst_f, 0, lay_f.bytes);
            for (int b = 0; b < B; b++)
                for (int j = 0; j < M; j++) {
                    for (int kvh = 0; kvh < Hkv; kvh++) {
                        float* r = &row[static_cast<size_t>(o + kvh * D)];
                        std::fill(r, r + D, 0.0f);
                        for (int h = kvh * grp; h < (kvh + 1) * grp; h++)
                            hash_fill(r, static_cast<size_t>(D), seed, ((static_cast<uint64_t>(b) * M + j) * H + h) * D, true);
                        if (grp > 1)
                            for (int d = 0; d < D; d++) r[d] /= static_cast<float>(grp);
                    }
                    store_token(lay, dst, b, j, row.data());
                    if (i8) store_token(lay_f, dst_f, b, j, row.data());
                }
            for (size_t ci = 1; ci < ncopies; ci++) std::memcpy(copy_at(t, ci), dst, copy_bytes);
        }
        // Q rows [B*N, H*D + 2o] (MHA's values at offset o), O [B, N, H, Dw]
        const ptrdiff_t qw = static_cast<ptrdiff_t>(H) * D + 2 * o;
        const size_t rows_q = static_cast<size_t>(B) * N, hd = static_cast<size_t>(H) * D;
        const size_t nq = rows_q * static_cast<size_t>(qw), nout = rows_q * H * static_cast<size_t>(Dw);
        q_ = AlignedBuffer(nq * sizeof(float));
        o_ = AlignedBuffer(nout * sizeof(float));
        if (o > 0) std::memset(q_.data(), 0, nq * sizeof(float));
        for (size_t r = 0; r < rows_q; r++) hash_fill(q_.as<float>() + r * static_cast<size_t>(qw) + o, hd, kSeedQ, r * hd);

        problems_.resize(ncopies);
        for (size_t ci = 0; ci < ncopies; ci++) {
            mh_attn_problem& p = problems_[ci];
            p = mh_attn_problem{};
            p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = H, p.n_kv_heads = Hkv;
            p.head_dim_qk = p.head_dim_v = Dw;
            p.q = tensor_view(q_.data(), N * qw, qw, D);
            p.k = core_kv_view(lay, copy_at(0, ci));
            p.v = core_kv_view(lay, copy_at(1, ci));
            p.k_dtype = p.v_dtype = c_.kv_dtype;
            p.o.data = o_.as<float>();
            p.o.stride_batch = static_cast<ptrdiff_t>(N) * H * Dw;
            p.o.stride_token = static_cast<ptrdiff_t>(H) * Dw;
            p.o.stride_head = Dw;
        }
        opt_ = mh_attn_options_default();
        opt_.causal = 1;
        if (moh()) {
            route_queries();
            opt_.head_gates = gates_.data();
        }
        if (c_.impl == Impl::Blas) {
            if (c_.kv_dtype != MH_DTYPE_F32) return fail("the openblas baseline reads f32 K/V only");
            if (o > 0) return fail("the openblas baseline reads disjoint heads only");
            const size_t n = blas_attention_scratch_floats(problems_[0]);
            ws_ = AlignedBuffer(n * sizeof(float));
            workspace_bytes_ = n * sizeof(float);
            blas_set_threads(c_.threads);
        } else {
            size_t ws = 0, ws_f = 0;
            mh_status s = mh_attention_workspace_size(ctx_.get(), &problems_[0], &opt_, &ws);
            if (s != MH_OK) return fail("mh_attention_workspace_size", s);
            if (i8) {
                const mh_attn_problem pf = f32_problem(problems_[0], lay_f, kf, vf);
                s = mh_attention_workspace_size(ctx_.get(), &pf, &opt_, &ws_f);
                if (s != MH_OK) return fail("mh_attention_workspace_size (f32 K/V)", s);
            }
            workspace_bytes_ = ws;
            ws_ = AlignedBuffer(std::max(ws, ws_f));
        }
        kv_bytes_per_token_ = 2 * lay.token_bytes;  // o > 0: with the 4o halo zeros; int8: with the scales
        const double pairs = causal_pairs(N, M) * B;
        flops_ = pairs * H * active() * 4.0 * Dw;
        const double kv_read = static_cast<double>(B) * M * static_cast<double>(kv_bytes_per_token_);
        const double q_o_bytes = static_cast<double>(nq + nout) * sizeof(float);
        bytes_ = decode ? kv_read * kv_read_fraction_ : kv_read + q_o_bytes;
        working_set_bytes_ = 2.0 * static_cast<double>(copy_bytes) + q_o_bytes;

        // One untimed call (also the warm-up), checked against the oracle.
        if (!call(0)) return false;
        next_copy_ = problems_.size() > 1 ? 1 : 0;  // copy 0 was just read
        std::vector<int> heads = spread(H, H), rows = spread(N, N);
        const double per_head_row = static_cast<double>(M) * 2.0 * Dw;
        if (B * per_head_row * H * N > kOracleBudgetMacs) {
            heads = {0, H / 3, (2 * H) / 3, H - 1};
            std::sort(heads.begin(), heads.end());
            heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
            if (B * per_head_row * static_cast<double>(heads.size()) * N > kOracleBudgetMacs) rows = spread(N, 32);
        }
        std::vector<double> ref;
        ref_attention(problems_[0], true, heads, rows, ref);
        ErrorAccumulator acc;
        const float* out = o_.as<float>();
        const size_t nh = heads.size(), nr = rows.size();
        for (int b = 0; b < B; b++)
            for (size_t ri = 0; ri < nr; ri++)
                for (size_t hi = 0; hi < nh; hi++)
                    for (int d = 0; d < Dw; d++) {
                        const size_t oi = ((static_cast<size_t>(b) * N + static_cast<size_t>(rows[ri])) * H + static_cast<size_t>(heads[hi])) * Dw + d;
                        const double g = moh() ? gates_[oi / static_cast<size_t>(Dw)] : 1.0;
                        acc.add(out[oi], g * ref[((static_cast<size_t>(b) * nr + ri) * nh + hi) * Dw + d]);
                    }
        err_ = acc.result();
        checked_fraction_ = static_cast<double>(nh * nr) / (static_cast<double>(H) * N);
        if (o == 0) {
            set_base_distance(out, nout);
        } else {  // each head's middle D outputs, where MHA's head sits
            std::vector<float> mid(rows_q * hd);
            for (size_t r = 0; r < rows_q * H; r++) std::copy_n(out + r * Dw + o, D, &mid[r * D]);
            set_base_distance(mid.data(), mid.size());
        }
        if (i8) return quantisation_error(f32_problem(problems_[0], lay_f, kf, vf), nout);
        return true;
    }

    // The problem p on f32 K/V of the same layout (the unquantised values of an int8 case).
    static mh_attn_problem f32_problem(mh_attn_problem p, const CoreKvLayout& lay_f, const void* kf, const void* vf) {
        p.k = core_kv_view(lay_f, kf);
        p.v = core_kv_view(lay_f, vf);
        p.k_dtype = p.v_dtype = MH_DTYPE_F32;
        return p;
    }

    // q_err: the int8 call's output (in o_) against the same call on f32 K/V, over all of it.
    bool quantisation_error(mh_attn_problem pf, size_t nout) {
        std::vector<float> of(nout);
        pf.o.data = of.data();
        const mh_status s = mh_attention(ctx_.get(), &pf, &opt_, ws_.data(), ws_.size());
        if (s != MH_OK) return fail("mh_attention (f32 K/V)", s);
        ErrorAccumulator acc;
        for (size_t i = 0; i < nout; i++) acc.add(o_.as<float>()[i], of[i]);
        q_err_ = acc.result().rel_l2;
        return true;
    }

    bool moh() const { return variant_->family == MH_VARIANT_MOH; }

    // MoH on the bare core: head_gates [B, N, H] from the row's seeded learned router applied
    // to each query row Q[b, t, :, :] (as if d_model = H*D), by the MoH oracle; the fraction of
    // (sequence, K/V head) pairs that some query uses scales the decode bytes read.
    void route_queries() {
        const int B = c_.batch, N = c_.n_q, H = c_.n_heads, D = c_.head_dim, g = H / kv_;
        LayerWeights stub;  // dimensions only: the router reads the rows, not the base weights
        stub.d_model = stub.kdim = stub.vdim = H * D;
        stub.n_heads = H, stub.n_kv_heads = kv_, stub.head_dim = stub.head_dim_v = D;
        const LayerWeights r = variant_->derive(stub, kv_);
        const mh_layer_config cfg = layer_config(*variant_, r);
        const mh_layer_weights view = r.view();
        const size_t rows = static_cast<size_t>(B) * N;
        std::vector<double> gd(rows * H);
        std::vector<unsigned char> sel(rows * H);
        oracle_moh_gates(&cfg, &view, q_.as<float>(), static_cast<int>(rows), gd.data(), sel.data());
        gates_.assign(gd.begin(), gd.end());
        size_t used = 0;
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < kv_; kvh++) {
                bool any = false;
                for (int t = 0; t < N && !any; t++)
                    for (int h = kvh * g; h < (kvh + 1) * g; h++) any |= gates_[(static_cast<size_t>(b) * N + t) * H + h] != 0.0f;
                used += any;
            }
        kv_read_fraction_ = static_cast<double>(used) / (static_cast<double>(B) * kv_);
    }

    AlignedBuffer q_, k_, v_, o_, ws_;
    std::vector<float> gates_;
    double kv_read_fraction_ = 1.0;
    std::vector<mh_attn_problem> problems_;
    size_t next_copy_ = 0;
    mh_attn_options opt_{};
    double flops_ = 0, bytes_ = 0;
};

// ------------------------------------------------------------------ layers
class LayerFixtureBase : public Fixture {
public:
    using Fixture::Fixture;

protected:
    // The variant's weights derived from the base layer, and (library) the layer object.
    bool build_layer() {
        w_ = variant_->derive(base_layer(c_), kv_);
        cfg_ = layer_config(*variant_, w_);
        if (c_.impl == Impl::Blas) {
            weights_bytes_ = sizeof(float) * (w_.wq.size() + w_.wk.size() + w_.wv.size() + w_.wo.size() + w_.bq.size() +
                                              w_.bk.size() + w_.bv.size() + w_.bo.size());
            blas_set_threads(c_.threads);
            return true;
        }
        if (!make_context()) return false;
        const mh_layer_weights view = w_.view();
        mh_layer* layer = nullptr;
        const mh_status s = mh_layer_create(ctx_.get(), &cfg_, &view, &layer);
        if (s != MH_OK) return fail("mh_layer_create", s);
        layer_.reset(layer);
        weights_bytes_ = mh_layer_weights_bytes(layer);
        return true;
    }

    // FLOPs of the four projections for `rows` query rows and `kv_rows` key/value rows.
    // Overlapping heads: W' reads H*(Dv + 2o), and the core's heads are D + 2o wide.
    double projection_flops(double rows, double kv_rows) const {
        const double H = w_.n_heads, Hkv = w_.n_kv_heads, D = w_.head_dim, Dv = w_.head_dim_v;
        return 2.0 * rows * w_.d_model * H * D * active()  // Q (MoH: active heads only)
               + 2.0 * kv_rows * w_.kdim * Hkv * D          // K
               + 2.0 * kv_rows * w_.vdim * Hkv * Dv         // V
               + 2.0 * rows * H * (Dv + 2.0 * config_overlap(cfg_)) * w_.d_model * active();  // O
    }
    double attention_flops(double pairs) const {
        return pairs * w_.n_heads * active() * (2.0 * (w_.head_dim + 2 * config_overlap(cfg_)) + 2.0 * (w_.head_dim_v + 2 * config_overlap(cfg_)));
    }
    double weight_float_bytes() const {
        return 4.0 * static_cast<double>(w_.wq.size() + w_.wk.size() + w_.wv.size() + w_.wo.size() + w_.bq.size() +
                                         w_.bk.size() + w_.bv.size() + w_.bo.size());
    }

    // The double oracle at `rows` of sequence 0 (self-attention: xkv = xq): the harness's own
    // for the GQA family, the test suite's MoH oracle for MoH.
    void layer_rows(const float* xq, int n, const float* xkv, int m, bool causal, const std::vector<int>& rows,
                    std::vector<double>& out) const {
        if (cfg_.variant != MH_VARIANT_MOH) {
            ref_layer_rows(cfg_, w_.view(), xq, n, xkv, xkv, m, causal, rows, out);
            return;
        }
        const mh_layer_weights view = w_.view();
        out.assign(rows.size() * static_cast<size_t>(cfg_.d_model), 0.0);
        oracle_moh_rows(&cfg_, &view, xq, xkv, m, causal ? 1 : 0, rows.data(), static_cast<int>(rows.size()), n,
                        out.data());
    }

    LayerWeights w_;
    mh_layer_config cfg_{};
    LayerPtr layer_;
};

// layer / cross: mh_layer_forward without a mask (full attention); prefill with a d_model:
// the same, causal (e.g. DCMHA, which has no bare-core form). cross: key = value input
// [B, M, kdim], as an encoder's output feeds a decoder. The oracle: batch 0 at up to 32 query
// rows spread over N (every K/V projection computed).
class ForwardFixture : public LayerFixtureBase {
public:
    using LayerFixtureBase::LayerFixtureBase;

    void run(benchmark::State& st) override {
        if (c_.impl == Impl::Blas) blas_set_threads(c_.threads);
        for (auto _ : st) {
            if (!call()) {
                st.SkipWithError(error_.c_str());
                break;
            }
            benchmark::ClobberMemory();
        }
        const double it = static_cast<double>(st.iterations());
        report(st, flops_ * it, bytes_ * it, static_cast<double>(c_.batch) * c_.n_q * it);
        st.counters["kv_len"] = 0.0;
    }

private:
    bool call() {
        const int B = c_.batch, N = c_.n_q, M = c_.n_kv;
        if (c_.impl == Impl::Blas) {
            blas_layer_forward(w_, B, N, M, xq_.data(), xk(), xk(), false, out_.as<float>(), ws_.as<float>());
            return true;
        }
        const mh_status s = mh_layer_forward(layer_.get(), &args_, ws_.data(), ws_.size());
        if (s != MH_OK) return fail("mh_layer_forward", s);
        return true;
    }
    const float* xk() const { return c_.mode == Mode::Cross ? xkv_.data() : xq_.data(); }

    bool do_setup() override {
        if (!build_layer()) return false;
        const int B = c_.batch, N = c_.n_q, M = c_.mode == Mode::Cross ? c_.n_kv : c_.n_q;
        const size_t nx = static_cast<size_t>(B) * N * w_.d_model;
        xq_.resize(nx);
        hash_fill(xq_.data(), nx, kSeedX, 0);
        if (c_.mode == Mode::Cross) {
            xkv_.resize(static_cast<size_t>(B) * M * w_.kdim);
            hash_fill(xkv_.data(), xkv_.size(), kSeedKV, 0);
            if (w_.kdim != w_.vdim) return fail("cross cases need kdim == vdim (one key/value input)");
        }
        out_ = AlignedBuffer(nx * sizeof(float));
        args_ = mh_forward_args{};
        args_.batch = B;
        args_.n_q = N;
        args_.n_kv = M;
        args_.query = xq_.data();
        args_.key = c_.mode == Mode::Cross ? xkv_.data() : nullptr;
        args_.value = args_.key;
        args_.out = out_.as<float>();
        opt_ = mh_attn_options_default();
        opt_.causal = c_.mode == Mode::Prefill ? 1 : 0;
        args_.opt = opt_.causal ? &opt_ : nullptr;
        if (c_.impl == Impl::Blas) {
            const size_t n = blas_layer_scratch_floats(w_, B, N, M);
            ws_ = AlignedBuffer(n * sizeof(float));
            workspace_bytes_ = n * sizeof(float);
        } else {
            size_t ws = 0;
            const mh_status s = mh_layer_forward_workspace_size(layer_.get(), B, N, M, &ws);
            if (s != MH_OK) return fail("mh_layer_forward_workspace_size", s);
            workspace_bytes_ = ws;
            ws_ = AlignedBuffer(ws);
        }
        kv_bytes_per_token_ = (static_cast<size_t>(w_.n_kv_heads) * (w_.head_dim + w_.head_dim_v) + 4 * static_cast<size_t>(config_overlap(cfg_))) * sizeof(float);
        mh_kv_cache* probe = nullptr;  // DCMHA's cache also holds its key factors: ask the cache
        if (cfg_.variant == MH_VARIANT_DCMHA && mh_kv_cache_create(layer_.get(), 1, 1, MH_DTYPE_F32, &probe) == MH_OK)
            kv_bytes_per_token_ = mh_kv_cache_bytes_per_token(probe);
        mh_kv_cache_destroy(probe);
        flops_ = B * (projection_flops(N, M) + attention_flops(opt_.causal ? causal_pairs(N, M) : static_cast<double>(N) * M));
        const double in_bytes = 4.0 * (static_cast<double>(nx) + static_cast<double>(xkv_.size()));
        bytes_ = weight_float_bytes() + in_bytes + 4.0 * static_cast<double>(nx);
        working_set_bytes_ = bytes_ + static_cast<double>(workspace_bytes_);

        if (!call()) return false;
        const std::vector<int> rows = spread(N, 32);
        std::vector<double> ref;
        layer_rows(xq_.data(), N, xk(), M, opt_.causal != 0, rows, ref);
        ErrorAccumulator acc;
        const float* out = out_.as<float>();
        for (size_t ri = 0; ri < rows.size(); ri++)
            for (int c = 0; c < w_.d_model; c++)
                acc.add(out[static_cast<size_t>(rows[ri]) * w_.d_model + c], ref[ri * static_cast<size_t>(w_.d_model) + c]);
        err_ = acc.result();
        checked_fraction_ = static_cast<double>(rows.size()) / (static_cast<double>(B) * N);
        set_base_distance(out, nx);
        return true;
    }

    std::vector<float> xq_, xkv_;
    AlignedBuffer out_, ws_;
    mh_attn_options opt_{};
    mh_forward_args args_{};
    double flops_ = 0, bytes_ = 0;
};

// decode through the layer: mh_layer_decode of one token per iteration against a KV cache that
// holds M tokens when the timed loop starts.
//
// Decode appends and a cache cannot drop its last token, and refilling M tokens is a causal
// prefill through the layer (far slower than the loop), so the case runs a fixed number of
// iterations I (CaseSpec::iterations), the cache has capacity M + R*I for R repetitions, and its
// length grows from M to M + R*I - 1 over the repetitions (R*I << M; kv_len reports the mean
// of each repetition). FLOPs and bytes are summed
// over the exact lengths. The cache is filled once in setup (chunked decode of M - 1 tokens,
// then one 1-token decode checked against the oracle's row M - 1 of batch 0); a later call of
// the same case that would overflow it resets and refills it before its timed loop.
class DecodeLayerFixture : public LayerFixtureBase {
public:
    using LayerFixtureBase::LayerFixtureBase;

    void run(benchmark::State& st) override {
        if (mh_kv_cache_length(cache_.get()) + st.max_iterations > mh_kv_cache_capacity(cache_.get())) {
            if (!fill(cache_.get())) {
                st.SkipWithError(error_.c_str());
                return;
            }
        }
        const double len0 = mh_kv_cache_length(cache_.get());
        const mh_decode_args args = {c_.batch, 1, xtok_.data(), out_.as<float>(), nullptr};
        for (auto _ : st) {
            const mh_status s = mh_layer_decode(layer_.get(), cache_.get(), &args, ws_.data(), ws_.size());
            if (s != MH_OK) {
                fail("mh_layer_decode", s);
                st.SkipWithError(error_.c_str());
                break;
            }
            benchmark::ClobberMemory();
        }
        const double it = static_cast<double>(st.iterations());
        // Token t of the loop attends to len0 + t + 1 keys (the cache plus itself).
        const double keys = it * (len0 + 1) + it * (it - 1) / 2;
        const double B = c_.batch;
        const double flops = B * (it * projection_flops(1, 1) + attention_flops(keys));
        const double bytes = it * static_cast<double>(weights_bytes_) + B * keys * static_cast<double>(kv_bytes_per_token_);
        report(st, flops, bytes, B * it);
        st.counters["kv_len"] = it > 0 ? keys / it : 0.0;
    }

private:
    bool do_setup() override {
        if (c_.impl != Impl::Library) return fail("decode through the layer has no baseline");
        if (!build_layer()) return false;
        const int B = c_.batch, M = c_.n_kv, dm = w_.d_model;
        mh_kv_cache* cache = nullptr;
        mh_status s = mh_kv_cache_create(layer_.get(), B, M + c_.iterations * repetitions(g_opt), c_.kv_dtype, &cache);
        if (s != MH_OK) return fail("mh_kv_cache_create", s);
        cache_.reset(cache);
        kv_bytes_per_token_ = mh_kv_cache_bytes_per_token(cache);

        chunk_ = std::max(1, std::min(512, M - 1));
        size_t ws1 = 0, wsc = 0;
        s = mh_layer_decode_workspace_size(layer_.get(), B, 1, &ws1);
        if (s != MH_OK) return fail("mh_layer_decode_workspace_size", s);
        s = mh_layer_decode_workspace_size(layer_.get(), B, chunk_, &wsc);
        if (s != MH_OK) return fail("mh_layer_decode_workspace_size", s);
        workspace_bytes_ = ws1;
        ws_ = AlignedBuffer(std::max(ws1, wsc));

        // The prompt: x_[b][t][:] for t < M; the timed token: xtok_[b][:].
        x_.resize(static_cast<size_t>(B) * M * dm);
        hash_fill(x_.data(), x_.size(), kSeedX, 0);
        xtok_.resize(static_cast<size_t>(B) * dm);
        hash_fill(xtok_.data(), xtok_.size(), kSeedQ, 0);
        xchunk_.resize(static_cast<size_t>(B) * chunk_ * dm);
        out_ = AlignedBuffer(static_cast<size_t>(B) * chunk_ * dm * sizeof(float));
        if (!fill(cache_.get())) return false;
        working_set_bytes_ = static_cast<double>(weights_bytes_) +
                             static_cast<double>(B) * (M + c_.iterations * repetitions(g_opt)) * static_cast<double>(kv_bytes_per_token_);

        // out_ holds the output of the last prompt token (position M - 1) of every sequence.
        std::vector<double> ref;
        layer_rows(x_.data(), M, x_.data(), M, true, {M - 1}, ref);
        ErrorAccumulator acc;
        for (int c = 0; c < dm; c++) acc.add(out_.as<float>()[c], ref[static_cast<size_t>(c)]);
        err_ = acc.result();
        checked_fraction_ = 1.0 / B;  // of the checked token's outputs
        set_base_distance(out_.as<float>(), static_cast<size_t>(B) * dm);
        return c_.kv_dtype != MH_DTYPE_I8 || quantisation_error();
    }

    // q_err: the last prompt token's output (in out_) against the same decode on an f32 cache
    // filled with the same tokens (a second cache, freed after).
    bool quantisation_error() {
        const size_t n = static_cast<size_t>(c_.batch) * w_.d_model;
        const std::vector<float> out_i8(out_.as<float>(), out_.as<float>() + n);
        mh_kv_cache* cache = nullptr;
        const mh_status s = mh_kv_cache_create(layer_.get(), c_.batch, c_.n_kv, MH_DTYPE_F32, &cache);
        if (s != MH_OK) return fail("mh_kv_cache_create (f32)", s);
        const CachePtr f32_cache(cache);
        if (!fill(cache)) return false;
        ErrorAccumulator acc;
        for (size_t i = 0; i < n; i++) acc.add(out_i8[i], out_.as<float>()[i]);
        q_err_ = acc.result().rel_l2;
        std::copy(out_i8.begin(), out_i8.end(), out_.as<float>());
        return true;
    }

    // Reset, then decode the M prompt tokens: M - 1 in chunks, the last one alone.
    bool fill(mh_kv_cache* cache) {
        const int B = c_.batch, M = c_.n_kv, dm = w_.d_model;
        mh_kv_cache_reset(cache);
        int t = 0;
        while (t < M) {
            const int n = t < M - 1 ? std::min(chunk_, M - 1 - t) : 1;
            for (int b = 0; b < B; b++)
                std::copy_n(&x_[(static_cast<size_t>(b) * M + t) * dm], static_cast<size_t>(n) * dm,
                            &xchunk_[static_cast<size_t>(b) * n * dm]);
            const mh_decode_args args = {B, n, xchunk_.data(), out_.as<float>(), nullptr};
            const mh_status s = mh_layer_decode(layer_.get(), cache, &args, ws_.data(), ws_.size());
            if (s != MH_OK) return fail("mh_layer_decode (filling the cache)", s);
            t += n;
        }
        if (mh_kv_cache_length(cache) != M)
            return fail("the KV cache length after filling is " + std::to_string(mh_kv_cache_length(cache)) +
                        ", expected " + std::to_string(M));
        return true;
    }

    CachePtr cache_;
    int chunk_ = 1;
    std::vector<float> x_, xtok_, xchunk_;
    AlignedBuffer out_, ws_;
};

// ------------------------------------------------------------------ the one live fixture
std::string g_current_name;
std::unique_ptr<Fixture> g_current;
// --mh_interleave: repetitions of different cases alternate, so each case's fixture (a filled
// KV cache, packed layers) is kept for its next repetition instead of being rebuilt.
std::map<std::string, std::unique_ptr<Fixture>> g_kept;

std::unique_ptr<Fixture> make_fixture(const CaseSpec& c) {
    switch (c.mode) {
    case Mode::Prefill:
        if (is_layer_api(c)) return std::make_unique<ForwardFixture>(c);
        return std::make_unique<CoreFixture>(c);
    case Mode::Decode:
        if (is_layer_api(c)) return std::make_unique<DecodeLayerFixture>(c);
        return std::make_unique<CoreFixture>(c);
    case Mode::Layer:
    case Mode::Cross: return std::make_unique<ForwardFixture>(c);
    }
    return nullptr;
}

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

// ------------------------------------------------------------------ suites
// A model shape for the comparison at equal size: every variant at the same d_model and H.
struct Shape {
    int H, D, d_model;  // d_model 0: attention core only
};

CaseSpec make(Mode m, const std::string& v, Shape s, int n_q, int n_kv, mh_dtype dt, bool layer_api) {
    CaseSpec c;
    c.mode = m;
    c.variant = v;
    c.n_heads = s.H;
    c.head_dim = s.D;
    c.d_model = layer_api ? s.d_model : 0;
    c.n_q = n_q;
    c.n_kv = n_kv;
    c.kv_dtype = dt;
    return c;
}

class SuiteBuilder {
public:
    explicit SuiteBuilder(const SuiteOptions& o) : o_(o) {
        mh_isa_default(&best_);
        if (!mh_isa_supported(best_)) best_ = MH_ISA_SCALAR;
        t1_ = o.threads > 0 ? o.threads : 1;
        tall_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }

    // One case per applicable variant (all rows when `only` is empty).
    void variants(const CaseSpec& proto, std::vector<std::string> only = {}) {
        for (const VariantSpec& v : variant_table()) {
            if (!only.empty() && std::find(only.begin(), only.end(), v.name) == only.end()) continue;
            if (!is_layer_api(proto) && !v.core) continue;
            CaseSpec c = proto;
            c.variant = v.name;
            if (case_kv_heads(c) <= 0) continue;
            add(c);
        }
    }
    void add(CaseSpec c, mh_isa isa = MH_ISA_AUTO, int threads = 0, Impl impl = Impl::Library) {
        c.isa = isa == MH_ISA_AUTO ? best_ : isa;
        c.threads = threads > 0 ? threads : t1_;
        c.impl = impl;
        if (impl == Impl::Blas && (!blas_available() || c.kv_dtype != MH_DTYPE_F32 ||
                                   (c.mode != Mode::Layer && c.mode != Mode::Cross && is_layer_api(c))))
            return;
        if (!mh_isa_supported(c.isa)) return;
        if (case_kv_heads(c) <= 0) return;
        if (c.mode == Mode::Decode && is_layer_api(c) && c.iterations == 0) c.iterations = o_.quick ? 16 : 64;
        const std::string n = case_name(c);
        for (const CaseSpec& e : out_)
            if (case_name(e) == n) return;  // already there (e.g. --threads 1)
        out_.push_back(c);
    }
    // The SIMD ISAs this CPU and library support besides the best one (scalar is a baseline).
    std::vector<mh_isa> other_simd_isas() const {
        std::vector<mh_isa> out;
        for (int i = 1; i < MH_ISA_COUNT; i++) {
            const mh_isa isa = static_cast<mh_isa>(i);
            if (isa != MH_ISA_SCALAR && isa != best_ && mh_isa_supported(isa)) out.push_back(isa);
        }
        return out;
    }
    bool scaling() const { return o_.threads <= 0 && tall_ > 1; }
    int tall() const { return tall_; }
    std::vector<CaseSpec> take() { return std::move(out_); }

private:
    const SuiteOptions& o_;
    mh_isa best_ = MH_ISA_SCALAR;
    int t1_ = 1, tall_ = 1;
    std::vector<CaseSpec> out_;
};

const Mode P = Mode::Prefill, DEC = Mode::Decode, L = Mode::Layer, X = Mode::Cross;
const mh_dtype F32 = MH_DTYPE_F32, F16 = MH_DTYPE_F16, BF16 = MH_DTYPE_BF16, I8 = MH_DTYPE_I8;
// The rows whose caches hold plain K/V, the ones int8 K/V apply to (one overlapping-heads row).
const std::vector<std::string> kInt8Rows = {"mha", "gqa8", "mqa", "moh50", "overlap25"};

// A decode core case on a token-major cache (an engine's own [token][kv heads][D]).
CaseSpec token_major(CaseSpec c) {
    c.token_major = true;
    return c;
}

// The layer-API shape: the loaded layer, or the seeded one.
Shape layer_shape(const SuiteOptions& o, Shape seeded) {
    if (!o.file_layer) return seeded;
    return {o.file_layer->n_heads, o.file_layer->head_dim, o.file_layer->d_model};
}

std::vector<CaseSpec> quick_suite(const SuiteOptions& o) {
    SuiteBuilder s(o);
    const Shape core{16, 32, 0};
    const Shape enc = layer_shape(o, {16, 16, 256});
    const bool self_ok = !o.file_layer || (o.file_layer->kdim == o.file_layer->d_model && o.file_layer->vdim == o.file_layer->d_model);
    s.variants(make(P, "", core, 64, 64, F32, false));
    s.variants(make(DEC, "", core, 1, 256, F16, false));
    s.add(make(DEC, "gqa8", core, 1, 256, F32, false));
    s.variants(make(DEC, "", core, 1, 256, I8, false), kInt8Rows);
    s.add(token_major(make(DEC, "mha", core, 1, 256, F16, false)));
    if (self_ok) s.variants(make(L, "", enc, 64, 64, F32, true));
    if (!o.file_layer || o.file_layer->kdim == o.file_layer->vdim) s.variants(make(X, "", enc, 16, 48, F32, true));
    if (self_ok) {
        s.add(make(DEC, "mha", enc, 1, 64, F16, true));
        s.add(make(DEC, "mha", enc, 1, 64, I8, true));
        s.add(make(DEC, "gqa4", enc, 1, 64, F16, true));
    }
    // baselines and ISAs
    s.add(make(P, "mha", core, 64, 64, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", core, 1, 256, F16, false), MH_ISA_SCALAR);
    s.add(make(P, "mha", core, 64, 64, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    s.add(make(DEC, "gqa8", core, 1, 256, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    if (self_ok) s.add(make(L, "mha", enc, 64, 64, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
    for (mh_isa isa : s.other_simd_isas()) {
        s.add(make(P, "gqa8", core, 64, 64, F32, false), isa);
        s.add(make(DEC, "mha", core, 1, 256, I8, false), isa);
    }
    if (s.scaling()) {
        s.add(make(P, "gqa8", core, 64, 64, F32, false), MH_ISA_AUTO, s.tall());
        s.add(make(DEC, "gqa8", core, 1, 256, F16, false), MH_ISA_AUTO, s.tall());
    }
    return s.take();
}

// The default suite: every variant at the headline shapes, about 5 minutes on 2 cores of a
// recent x86 server. --mh_long adds the long tails (tens of minutes): the longest prompts and
// caches and the secondary shapes, whose setup (caches filled through the layer, oracles in
// double precision over every token, the derived variants' naive oracles) costs far more than
// their timed calls: 4K-token core prefill; encoder layers at 1K tokens for the variants
// outside the GQA family, at 2K/4K tokens for all, and at two more head shapes; f32 decode at
// 1K/16K; decode through the layer at 4K for every variant and at 16K/32K; DCMHA decode at the
// LLM heads (2K-32K); cross-attention with 128 queries.
std::vector<CaseSpec> default_suite(const SuiteOptions& o) {
    SuiteBuilder s(o);
    const Shape llm{32, 128, 0};                         // LLaMA-7B-like heads (core modes)
    const Shape enc = layer_shape(o, {16, 64, 1024});    // BERT-large-like layer (layer modes)
    const bool file = o.file_layer != nullptr;
    const bool self_ok = !file || (o.file_layer->kdim == o.file_layer->d_model && o.file_layer->vdim == o.file_layer->d_model);
    const bool cross_ok = !file || o.file_layer->kdim == o.file_layer->vdim;

    // 1. causal LLM prefill on the attention core
    for (int n : {512, 1024, 2048}) s.variants(make(P, "", llm, n, n, F32, false));
    if (o.long_tails) s.variants(make(P, "", llm, 4096, 4096, F32, false), {"mha", "gqa8"});
    s.add(make(P, "gqa8", llm, 2048, 2048, F16, false));  // K/V storage type in prefill
    // MoH's core against MHA's at MoH's reference shape (H 16, D 64: d_model 1024)
    s.variants(make(P, "", Shape{16, 64, 0}, 2048, 2048, F32, false), {"mha", "moh50", "moh75", "moh88"});

    // 2. decode against caches of 1K to 32K tokens (attention core, cache layout, cold)
    for (int m : {1024, 4096, 16384, 32768}) s.variants(make(DEC, "", llm, 1, m, F16, false));
    for (int m : o.long_tails ? std::vector<int>{1024, 4096, 16384, 32768} : std::vector<int>{4096, 32768})
        s.variants(make(DEC, "", llm, 1, m, F32, false));
    for (int m : {4096, 32768}) s.add(make(DEC, "gqa8", llm, 1, m, BF16, false));
    {
        CaseSpec c = make(DEC, "gqa8", llm, 1, 4096, F16, false);
        c.batch = 4;
        s.add(c);
    }
    // int8 K/V beside f16 (the rows whose caches hold plain K/V), and token-major caches (an
    // engine's own layout read in place) beside the head-major ones above
    for (int m : {4096, 32768}) s.variants(make(DEC, "", llm, 1, m, I8, false), kInt8Rows);
    for (int m : {4096, 32768}) s.add(token_major(make(DEC, "mha", llm, 1, m, F16, false)));
    s.add(token_major(make(DEC, "gqa8", llm, 1, 32768, F16, false)));

    // 3. encoder layers at equal model size (d_model = H*D), N = M
    if (self_ok) {
        // every variant at 128 and 512 tokens, the GQA family (cheap oracles) also at 1024
        for (int n : o.long_tails ? std::vector<int>{128, 512, 1024, 2048, 4096} : std::vector<int>{128, 512})
            s.variants(make(L, "", enc, n, n, F32, true));
        if (!o.long_tails) s.variants(make(L, "", enc, 1024, 1024, F32, true), {"mha", "gqa8", "gqa4", "mqa"});
        if (o.long_tails && !file) {
            s.variants(make(L, "", Shape{32, 64, 2048}, 512, 512, F32, true));
            s.variants(make(L, "", Shape{8, 128, 1024}, 512, 512, F32, true));
        }
    }

    // 4. decode through the layer with its KV cache: every variant at 1K, the GQA family at 4K
    if (self_ok) {
        s.variants(make(DEC, "", enc, 1, 1024, F16, true));
        if (o.long_tails) s.variants(make(DEC, "", enc, 1, 4096, F16, true));
        else s.variants(make(DEC, "", enc, 1, 4096, F16, true), {"mha", "gqa8", "gqa4", "mqa"});
        s.add(make(DEC, "gqa4", enc, 1, 4096, F32, true));
        for (int m : {1024, 4096}) s.add(make(DEC, "mha", enc, 1, m, I8, true));
    }

    // 5. cross-attention: decoder queries over an encoder output of another length
    if (cross_ok)
        for (int n : o.long_tails ? std::vector<int>{128, 448} : std::vector<int>{448}) s.variants(make(X, "", enc, n, 1500, F32, true));

    // 6. baselines in the same run: OpenBLAS (what a C user writes), the scalar path, AVX2
    for (int n : {512, 1024})
        for (const char* v : {"mha", "gqa8"}) s.add(make(P, v, llm, n, n, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    s.add(make(P, "mha", llm, 2048, 2048, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    for (int m : {4096, 32768})
        for (const char* v : {"mha", "gqa8"}) s.add(make(DEC, v, llm, 1, m, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    if (self_ok)
        for (const char* v : {"mha", "gqa4"}) s.add(make(L, v, enc, 512, 512, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
    if (cross_ok) s.add(make(X, "mha", enc, 448, 1500, F32, true), MH_ISA_AUTO, 0, Impl::Blas);

    s.add(make(P, "mha", llm, 512, 512, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", llm, 1, 4096, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", llm, 1, 4096, F16, false), MH_ISA_SCALAR);
    if (self_ok && !file) s.add(make(L, "mha", enc, 128, 128, F32, true), MH_ISA_SCALAR);

    for (mh_isa isa : s.other_simd_isas()) {  // e.g. avx2 on an AVX-512 machine, neon beside sve
        s.add(make(P, "gqa8", llm, 2048, 2048, F32, false), isa);
        s.add(make(DEC, "gqa8", llm, 1, 32768, F16, false), isa);
        for (int m : {4096, 32768}) {  // int8 and its f16 reference (MHA) on this ISA too
            s.add(make(DEC, "mha", llm, 1, m, F16, false), isa);
            for (const std::string& v : kInt8Rows) s.add(make(DEC, v, llm, 1, m, I8, false), isa);
        }
        if (self_ok) s.add(make(L, "gqa4", enc, 512, 512, F32, true), isa);
    }

    // DCMHA against MHA at the LLM heads through the layer (DCMHA has no bare-core form):
    // causal prefill N = 2048; --mh_long adds decode at 2K, 8K and 32K cached tokens (the
    // default suite has DCMHA's decode at the encoder shape, beside every variant). DCMHA's
    // oracle composes every query row in double precision: half a minute at 2K tokens, minutes
    // at 8K, and the cache can only be filled through the layer.
    if (!file) {
        const Shape dc{32, 128, 1024};
        for (const char* v : {"mha", "dcmha"}) {
            s.add(make(P, v, dc, 2048, 2048, F32, true));
            if (o.long_tails)
                for (int m : {2048, 8192, 32768}) s.add(make(DEC, v, dc, 1, m, F16, true));
        }
    }
    // CollabHead's shared keys at length
    if (o.long_tails && self_ok)
        for (int m : {16384, 32768}) {
            for (const char* v : {"mha", "collab"}) s.add(make(DEC, v, enc, 1, m, F16, true));
            s.add(make(DEC, "mha", enc, 1, m, I8, true));
        }

    // 7. thread scaling (every processor), unless --threads fixed one count for everything
    if (s.scaling()) {
        const int t = s.tall();
        for (const char* v : {"mha", "gqa8"}) s.add(make(P, v, llm, 2048, 2048, F32, false), MH_ISA_AUTO, t);
        for (const char* v : {"mha", "gqa8"}) s.add(make(DEC, v, llm, 1, 32768, F16, false), MH_ISA_AUTO, t);
        s.add(make(DEC, "mha", llm, 1, 32768, I8, false), MH_ISA_AUTO, t);
        if (self_ok) {
            for (const char* v : {"mha", "gqa4"}) s.add(make(L, v, enc, 1024, 1024, F32, true), MH_ISA_AUTO, t);
            s.add(make(DEC, "gqa8", enc, 1, 4096, F16, true), MH_ISA_AUTO, t);
        }
        if (cross_ok) s.add(make(X, "gqa4", enc, 448, 1500, F32, true), MH_ISA_AUTO, t);
        s.add(make(P, "gqa8", llm, 1024, 1024, F32, false), MH_ISA_AUTO, t, Impl::Blas);
    }
    return s.take();
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
    const std::string isa = c.impl == Impl::Blas ? "openblas" : mh_isa_name(c.isa);
    return std::string(mode_name(c.mode)) + "/" + c.variant + "/" + shape + "/" + dtype_name(c.kv_dtype) + "/" + isa +
           "/threads:" + std::to_string(c.threads);
}

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
    if (c.mode == Mode::Layer || c.mode == Mode::Cross) {
        const double dm = c.d_model;
        flops = B * (N * M * H * 4 * D + 2 * N * dm * H * D * 2 + 2 * M * dm * H * D * 2);
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
    g_base_outputs.clear();
    g_pool = AlignedBuffer();
}

}  // namespace mhb
