#include "fixture.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <new>

#include "core_kv.h"
#include "int8_probe.h"
#include "machine_limits.h"

namespace mhb {
namespace {

using benchmark::Counter;

constexpr size_t kBaseDistanceSamples = size_t{1} << 20;

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
    // mode/variant/shape/dtype/isa/threads:T -> mode/shape/dtype (+ the compute mode: bf16
    // cases compare with the base variant in bf16)
    std::vector<std::string> parts;
    size_t a = 0;
    for (size_t b; (b = n.find('/', a)) != std::string::npos; a = b + 1) parts.push_back(n.substr(a, b - a));
    parts.push_back(n.substr(a));
    return parts[0] + "/" + parts[2] + "/" + parts[3] + (c.compute != MH_COMPUTE_F32 ? mh_compute_name(c.compute) : "");
}

std::map<std::string, std::vector<float>> g_base_outputs;

AlignedBuffer g_pool;

}  // namespace

double causal_pairs(int n_q, int n_kv) {
    double pairs = 0;
    for (int i = 0; i < n_q; i++) {
        const long keep = std::min<long>(static_cast<long>(n_kv) - n_q + i + 1, n_kv);
        if (keep > 0) pairs += static_cast<double>(keep);
    }
    return pairs;
}

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

int case_halo(const CaseSpec& c) {
    const VariantSpec* v = find_variant(c.variant);
    return v ? c.head_dim * v->halo_pct / 100 : 0;
}

const LayerWeights& base_layer(const CaseSpec& c) {
    if (suite_options().file_layer) return *suite_options().file_layer;
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
    return is_layer_api(c) && suite_options().file_layer ? suite_options().file_layer->n_kv_heads : c.n_heads;
}

// The decode cases' rotation pool: one allocation (plain aligned, like the library's KV cache),
// kept for the whole run and grown when a case needs more (with an eighth to spare, so a case
// slightly larger than the last, e.g. overlapping heads' padded rows after MHA, fits).
uint8_t* rotation_pool(size_t bytes) {
    if (g_pool.size() < bytes) {
        g_pool = AlignedBuffer();
        g_pool = AlignedBuffer(bytes + bytes / 8);
        std::memset(g_pool.data(), 0, g_pool.size());  // fault it in once
    }
    return g_pool.as<uint8_t>();
}

size_t rotation_pool_size() { return g_pool.size(); }

void release_shared_buffers() {
    g_base_outputs.clear();
    g_pool = AlignedBuffer();
}

// ------------------------------------------------------------------ Fixture
Fixture::Fixture(const CaseSpec& c) : c_(c), kv_(case_kv_heads(c)), variant_(find_variant(c.variant)) {}

void Fixture::setup(bool nested) {
    nested_ = nested;
    const auto t0 = std::chrono::steady_clock::now();
    if (!nested) {
        rss0_ = current_rss_bytes();
        pool0_ = rotation_pool_size();
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

bool Fixture::fail(const char* what, mh_status s) {
    error_ = std::string(what) + ": " + mh_status_string(s);
    if (c_.kv_dtype == MH_DTYPE_I8 && !int8_refusal().empty())
        error_ = "skipped: this library does not accept int8 K/V (" + int8_refusal() + ")" +
                 (error_ == int8_refusal() ? "" : "; here " + error_);
    return false;
}

bool Fixture::make_context() {
    mh_context_config cfg = mh_context_config_default();
    cfg.num_threads = c_.threads;
    cfg.isa = c_.isa;
    mh_context* ctx = nullptr;
    const mh_status s = mh_context_create(&cfg, &ctx);
    if (s != MH_OK) return fail("mh_context_create", s);
    ctx_.reset(ctx);
    return true;
}

void Fixture::set_base_distance(const float* out, size_t n) {
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

void Fixture::report(benchmark::State& st, double flops, double bytes, double tokens) const {
    const MachineLimits& lim = machine_limits();
    double peak = 0;
    if (c_.impl == Impl::Blas) {
        for (int i = 1; i < MH_ISA_COUNT; i++) peak = std::max(peak, lim.peak(static_cast<mh_isa>(i), c_.threads));
    } else {
        peak = lim.peak(c_.isa, c_.threads, c_.compute);
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
    const size_t peak_rss = peak_rss_bytes(), base = rss0_ + (rotation_pool_size() - pool0_);
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

}  // namespace mhb
