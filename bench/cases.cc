// Case fixtures and registration.
//
// Every case owns a fixture: inputs, library objects, workspace, and the accuracy numbers from
// one untimed call compared with the double reference (reference.cc). Google Benchmark calls a
// case's function several times (to pick an iteration count, then for each repetition) and
// runs all the calls of one case before the next case, so the fixture is built on the first
// call, kept while the same case runs, and freed when the next case starts: setup and the
// reference are paid once per case, and only one case's buffers are alive at a time.
//
// All cases time wall-clock (UseRealTime): the library runs its own worker threads.
//
// Counters (rates are per second of wall time):
//   gflops        useful FLOPs / s: QK^T and PV count 2*Dqk + 2*Dv per kept (query, key) pair,
//                 counting exactly the pairs causality keeps (N(N+1)/2 per head for prefill);
//                 projections count 2*rows*in*out each. Softmax, scaling, bias: not counted.
//   pct_peak      gflops as % of the measured multiply-add peak for this ISA and thread count
//                 (machine_limits.cc).
//   gbps, pct_bw  decode modes only: bytes that must be read per token / s, and % of the
//                 measured read bandwidth for this thread count. decode: the K/V of all M keys;
//                 decode_layer: the K/V of every cached key plus the packed weights
//                 (mh_layer_weights_bytes), as a token of decode streams both. The reference
//                 is DRAM streaming bandwidth: data that stays in cache can exceed 100%.
//   tokens_per_s  query tokens processed / s (B*N per call).
//   weights_bytes mh_layer_weights_bytes (0 for the bare attention core).
//   kv_bytes_per_token  K+V bytes per token: mh_kv_cache_bytes_per_token for decode_layer,
//                 Hkv*(Dqk+Dv)*sizeof(kv dtype) otherwise.
//   workspace_bytes  what the *_workspace_size call asked for.
//   max_abs_err, rel_l2_err  vs the double reference (see each fixture for the subset used).
//   setup_s       seconds spent building the case and its reference (not timed).
//   kv_len        decode_layer only: mean number of keys attended per timed token.
#include "cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <new>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "machine_limits.h"
#include "reference.h"

namespace mhb {
namespace {

using benchmark::Counter;

// The full reference of an attention core case is computed when it costs at most this many
// multiply-adds; above it, only a few heads are (see AttentionFixture::reference_heads).
constexpr double kFullReferenceMacs = 1.5e8;

// Kept (query, key) pairs per (batch, head) for causal attention with the N queries at the end
// of the M keys (q_offset = MH_Q_OFFSET_END): query i sits at M - N + i and keeps keys 0..that.
double causal_pairs(int n_q, int n_kv) {
    double pairs = 0;
    for (int i = 0; i < n_q; i++) {
        const long keep = std::min<long>(static_cast<long>(n_kv) - n_q + i + 1, n_kv);
        if (keep > 0) pairs += static_cast<double>(keep);
    }
    return pairs;
}

// ------------------------------------------------------------------ fixture base
class Fixture {
public:
    explicit Fixture(const CaseSpec& c) : c_(c) {}
    virtual ~Fixture() = default;

    void setup() {
        const auto t0 = std::chrono::steady_clock::now();
        try {
            do_setup();
        } catch (const std::bad_alloc&) {
            error_ = "out of memory in the benchmark's own setup";
        }
        setup_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    virtual void run(benchmark::State& st) = 0;
    const std::string& error() const { return error_; }

protected:
    virtual bool do_setup() = 0;

    bool fail(const char* what, mh_status s) {
        error_ = std::string(what) + ": " + mh_status_string(s);
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

    // Sets every counter. flops, bytes and tokens are totals over this call's iterations.
    void report(benchmark::State& st, double flops, double bytes, double tokens) const {
        const MachineLimits& lim = machine_limits();
        st.counters["gflops"] = Counter(flops * 1e-9, Counter::kIsRate);
        const double peak = lim.peak(c_.isa, c_.threads);
        if (peak > 0) st.counters["pct_peak"] = Counter(100.0 * flops * 1e-9 / peak, Counter::kIsRate);
        if (bytes > 0) {
            st.counters["gbps"] = Counter(bytes * 1e-9, Counter::kIsRate);
            const double bw = lim.bandwidth(c_.threads);
            if (bw > 0) st.counters["pct_bw"] = Counter(100.0 * bytes * 1e-9 / bw, Counter::kIsRate);
        }
        st.counters["tokens_per_s"] = Counter(tokens, Counter::kIsRate);
        st.counters["weights_bytes"] = static_cast<double>(weights_bytes_);
        st.counters["kv_bytes_per_token"] = static_cast<double>(kv_bytes_per_token_);
        st.counters["workspace_bytes"] = static_cast<double>(workspace_bytes_);
        st.counters["max_abs_err"] = err_.max_abs;
        st.counters["rel_l2_err"] = err_.rel_l2;
        st.counters["setup_s"] = setup_s_;
    }

    CaseSpec c_;
    ContextPtr ctx_;
    std::string error_;
    ErrorStats err_;
    double setup_s_ = 0;
    size_t workspace_bytes_ = 0, weights_bytes_ = 0, kv_bytes_per_token_ = 0;
};

// ------------------------------------------------------------------ attention core
// prefill: N = M queries, causal, K/V token-major [B, M, Hkv, D] as projections produce them.
// decode: one query at position M - 1 over M keys (the core of a decode step), K/V head-major
// [B, Hkv, M, D] with a padded head stride, the layout KV caches (ours included) use; the
// cache itself is exercised by decode_layer.
class AttentionFixture : public Fixture {
public:
    using Fixture::Fixture;

    void run(benchmark::State& st) override {
        for (auto _ : st) {
            const mh_status s = mh_attention(ctx_.get(), &p_, &opt_, ws_.data(), ws_.size());
            if (s != MH_OK) {
                error_ = std::string("mh_attention: ") + mh_status_string(s);
                st.SkipWithError(error_.c_str());
                break;
            }
            benchmark::ClobberMemory();
        }
        const double it = static_cast<double>(st.iterations());
        report(st, flops_ * it, bytes_ * it, static_cast<double>(c_.batch) * c_.n_q * it);
    }

private:
    bool do_setup() override {
        if (!make_context()) return false;
        const int B = c_.batch, N = c_.n_q, M = c_.n_kv, H = c_.n_heads, Hkv = c_.n_kv_heads;
        const int D = c_.head_dim;
        const size_t es = dtype_size(c_.kv_dtype);
        // decode: each head's keys are one stream; the pad keeps streams from starting a power
        // of two apart (as in the library's KV cache)
        const bool head_major = c_.mode == Mode::Decode;
        const ptrdiff_t head_stride = static_cast<ptrdiff_t>(M) * D + (head_major ? 32 : 0);
        const size_t nq = static_cast<size_t>(B) * N * H * D;
        const size_t nkv = static_cast<size_t>(B) * Hkv * static_cast<size_t>(head_stride);
        Rng rng(0x6d68u + static_cast<uint64_t>(c_.mode == Mode::Decode));
        q_ = AlignedBuffer(nq * sizeof(float));
        o_ = AlignedBuffer(nq * sizeof(float));
        k_ = AlignedBuffer(nkv * es);
        v_ = AlignedBuffer(nkv * es);
        rng.fill(q_.as<float>(), nq);
        {
            std::vector<float> tmp(nkv);
            rng.fill(tmp.data(), nkv);
            store_as(c_.kv_dtype, tmp.data(), k_.data(), nkv);
            rng.fill(tmp.data(), nkv);
            store_as(c_.kv_dtype, tmp.data(), v_.data(), nkv);
        }
        p_ = mh_attn_problem{};
        p_.batch = B;
        p_.n_q = N;
        p_.n_kv = M;
        p_.n_heads = H;
        p_.n_kv_heads = Hkv;
        p_.head_dim_qk = D;
        p_.head_dim_v = D;
        p_.scale = 0.0f;
        p_.q = {q_.data(), static_cast<ptrdiff_t>(N) * H * D, static_cast<ptrdiff_t>(H) * D, D};
        if (head_major) {
            p_.k = {k_.data(), Hkv * head_stride, D, head_stride};
            p_.v = {v_.data(), Hkv * head_stride, D, head_stride};
        } else {
            p_.k = {k_.data(), static_cast<ptrdiff_t>(M) * Hkv * D, static_cast<ptrdiff_t>(Hkv) * D, D};
            p_.v = {v_.data(), static_cast<ptrdiff_t>(M) * Hkv * D, static_cast<ptrdiff_t>(Hkv) * D, D};
        }
        p_.k_dtype = p_.v_dtype = c_.kv_dtype;
        p_.o = o_.as<float>();
        p_.o_stride_batch = static_cast<ptrdiff_t>(N) * H * D;
        p_.o_stride_token = static_cast<ptrdiff_t>(H) * D;
        p_.o_stride_head = D;
        opt_ = mh_attn_options_default();
        opt_.causal = 1;

        size_t ws = 0;
        mh_status s = mh_attention_workspace_size(ctx_.get(), &p_, &opt_, &ws);
        if (s != MH_OK) return fail("mh_attention_workspace_size", s);
        workspace_bytes_ = ws;
        ws_ = AlignedBuffer(ws);
        kv_bytes_per_token_ = static_cast<size_t>(Hkv) * 2 * D * es;

        const double pairs = causal_pairs(N, M) * B;
        flops_ = pairs * H * (2.0 * D + 2.0 * D);
        bytes_ = c_.mode == Mode::Decode ? static_cast<double>(B) * M * kv_bytes_per_token_ : 0.0;

        // One untimed call (also the warm-up), checked against the reference.
        s = mh_attention(ctx_.get(), &p_, &opt_, ws_.data(), ws_.size());
        if (s != MH_OK) return fail("mh_attention", s);
        const std::vector<int> heads = reference_heads(pairs * H * 2.0 * D);
        std::vector<double> ref;
        ref_attention_causal(p_, heads, ref);
        ErrorAccumulator acc;
        const float* o = o_.as<float>();
        const size_t nh = heads.size();
        for (int b = 0; b < B; b++)
            for (int i = 0; i < N; i++)
                for (size_t hi = 0; hi < nh; hi++)
                    for (int d = 0; d < D; d++) {
                        const size_t oi = ((static_cast<size_t>(b) * N + i) * H + static_cast<size_t>(heads[hi])) * D + d;
                        const size_t ri = ((static_cast<size_t>(b) * N + i) * nh + hi) * D + d;
                        acc.add(o[oi], ref[ri]);
                    }
        err_ = acc.result();
        return true;
    }

    // All heads when the reference is cheap; otherwise four spread over the heads (first,
    // last, two in between) so every part of the GQA head-to-KV-head mapping is sampled.
    std::vector<int> reference_heads(double full_macs) const {
        const int H = c_.n_heads;
        std::vector<int> heads;
        if (full_macs <= kFullReferenceMacs) {
            for (int h = 0; h < H; h++) heads.push_back(h);
        } else {
            heads = {0, H / 3, (2 * H) / 3, H - 1};
            std::sort(heads.begin(), heads.end());
            heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
        }
        return heads;
    }

    AlignedBuffer q_, k_, v_, o_, ws_;
    mh_attn_problem p_{};
    mh_attn_options opt_{};
    double flops_ = 0, bytes_ = 0;
};

// ------------------------------------------------------------------ layers
// Shared by layer (forward) and decode_layer: a self-attention layer with d_model = H*D, no
// bias, random weights scaled by 1/sqrt(fan_in) so activations stay O(1).
class LayerFixtureBase : public Fixture {
public:
    using Fixture::Fixture;

protected:
    bool build_layer() {
        if (!make_context()) return false;
        const int H = c_.n_heads, Hkv = c_.n_kv_heads, D = c_.head_dim;
        dm_ = H * D;
        cfg_ = mh_layer_config_default();
        cfg_.variant = Hkv == H ? MH_VARIANT_MHA : (Hkv == 1 ? MH_VARIANT_MQA : MH_VARIANT_GQA);
        cfg_.d_model = dm_;
        cfg_.n_heads = H;
        cfg_.n_kv_heads = Hkv;
        cfg_.head_dim = D;
        cfg_.head_dim_v = D;
        cfg_.kdim = cfg_.vdim = dm_;
        cfg_.bias = 0;
        Rng rng(0x6c61u);
        const float s_in = 1.0f / std::sqrt(static_cast<float>(dm_));
        wq_.resize(static_cast<size_t>(H) * D * dm_);
        wk_.resize(static_cast<size_t>(Hkv) * D * dm_);
        wv_.resize(static_cast<size_t>(Hkv) * D * dm_);
        wo_.resize(static_cast<size_t>(dm_) * H * D);
        rng.fill(wq_.data(), wq_.size(), s_in);
        rng.fill(wk_.data(), wk_.size(), s_in);
        rng.fill(wv_.data(), wv_.size(), s_in);
        rng.fill(wo_.data(), wo_.size(), 1.0f / std::sqrt(static_cast<float>(H * D)));
        w_ = mh_layer_weights{wq_.data(), wk_.data(), wv_.data(), wo_.data(), nullptr, nullptr, nullptr, nullptr};
        mh_layer* layer = nullptr;
        const mh_status s = mh_layer_create(ctx_.get(), &cfg_, &w_, &layer);
        if (s != MH_OK) return fail("mh_layer_create", s);
        layer_.reset(layer);
        weights_bytes_ = mh_layer_weights_bytes(layer);
        return true;
    }

    // FLOPs of the four projections for `rows` query rows and `kv_rows` key/value rows.
    double projection_flops(double rows, double kv_rows) const {
        const double H = c_.n_heads, Hkv = c_.n_kv_heads, D = c_.head_dim;
        return 2.0 * rows * dm_ * H * D          // Q
               + 2.0 * kv_rows * dm_ * Hkv * D   // K
               + 2.0 * kv_rows * dm_ * Hkv * D   // V
               + 2.0 * rows * H * D * dm_;       // O
    }
    double attention_flops(double pairs) const { return pairs * c_.n_heads * 4.0 * c_.head_dim; }

    int dm_ = 0;
    mh_layer_config cfg_{};
    std::vector<float> wq_, wk_, wv_, wo_;
    mh_layer_weights w_{};
    LayerPtr layer_;
};

// layer: mh_layer_forward, causal self-attention over N tokens. The reference is the whole
// layer in double, evaluated at 8 query rows spread over the sequence (first and last
// included) of batch 0: every K/V projection up to the last row is still computed.
class LayerFixture : public LayerFixtureBase {
public:
    using LayerFixtureBase::LayerFixtureBase;

    void run(benchmark::State& st) override {
        for (auto _ : st) {
            const mh_status s = mh_layer_forward(layer_.get(), &args_, ws_.data(), ws_.size());
            if (s != MH_OK) {
                error_ = std::string("mh_layer_forward: ") + mh_status_string(s);
                st.SkipWithError(error_.c_str());
                break;
            }
            benchmark::ClobberMemory();
        }
        const double it = static_cast<double>(st.iterations());
        report(st, flops_ * it, 0.0, static_cast<double>(c_.batch) * c_.n_q * it);
    }

private:
    bool do_setup() override {
        if (!build_layer()) return false;
        const int B = c_.batch, N = c_.n_q;
        const size_t nx = static_cast<size_t>(B) * N * dm_;
        x_.resize(nx);
        Rng(0x78u).fill(x_.data(), nx);
        out_ = AlignedBuffer(nx * sizeof(float));
        opt_ = mh_attn_options_default();
        opt_.causal = 1;
        args_ = mh_forward_args{};
        args_.batch = B;
        args_.n_q = N;
        args_.n_kv = N;
        args_.query = x_.data();
        args_.key = nullptr;
        args_.value = nullptr;
        args_.out = out_.as<float>();
        args_.opt = &opt_;
        size_t ws = 0;
        mh_status s = mh_layer_forward_workspace_size(layer_.get(), B, N, N, &ws);
        if (s != MH_OK) return fail("mh_layer_forward_workspace_size", s);
        workspace_bytes_ = ws;
        ws_ = AlignedBuffer(ws);
        kv_bytes_per_token_ = static_cast<size_t>(c_.n_kv_heads) * 2 * c_.head_dim * sizeof(float);
        flops_ = B * (projection_flops(N, N) + attention_flops(causal_pairs(N, N)));

        s = mh_layer_forward(layer_.get(), &args_, ws_.data(), ws_.size());
        if (s != MH_OK) return fail("mh_layer_forward", s);
        std::vector<int> rows;
        const int nr = std::min(N, 8);
        for (int r = 0; r < nr; r++) rows.push_back(nr == 1 ? 0 : static_cast<int>(static_cast<long>(r) * (N - 1) / (nr - 1)));
        std::vector<double> ref;
        ref_layer_rows(cfg_, w_, x_.data(), N, rows, ref);
        ErrorAccumulator acc;
        for (size_t ri = 0; ri < rows.size(); ri++)
            for (int c = 0; c < dm_; c++)
                acc.add(out_.as<float>()[static_cast<size_t>(rows[ri]) * dm_ + c], ref[ri * dm_ + c]);
        err_ = acc.result();
        return true;
    }

    std::vector<float> x_;
    AlignedBuffer out_, ws_;
    mh_attn_options opt_{};
    mh_forward_args args_{};
    double flops_ = 0;
};

// decode_layer: mh_layer_decode of one token per iteration against a KV cache that holds M
// tokens when the timed loop starts.
//
// Decode appends and a cache cannot drop its last token, and refilling M tokens is a full
// causal prefill (far slower than the loop), so: the case runs a fixed number of iterations
// I (CaseSpec::iterations, set with ->Iterations()), the cache has capacity M + I, and the
// length grows from M to M + I - 1 during the loop (I << M; the kv_len counter reports the
// mean). FLOPs and bytes are summed over the exact lengths. The cache is filled once in setup
// (chunked decode of M - 1 tokens, then one 1-token decode checked against the reference row
// M - 1 of batch 0); a further call of the same case (e.g. --benchmark_repetitions) that would
// overflow it resets and refills it before its timed loop.
class DecodeLayerFixture : public LayerFixtureBase {
public:
    using LayerFixtureBase::LayerFixtureBase;

    void run(benchmark::State& st) override {
        if (mh_kv_cache_length(cache_.get()) + st.max_iterations > mh_kv_cache_capacity(cache_.get())) {
            if (!fill()) {
                st.SkipWithError(error_.c_str());
                return;
            }
        }
        const double len0 = mh_kv_cache_length(cache_.get());
        for (auto _ : st) {
            const mh_status s = mh_layer_decode(layer_.get(), cache_.get(), c_.batch, 1, xtok_.data(),
                                                out_.as<float>(), ws_.data(), ws_.size());
            if (s != MH_OK) {
                error_ = std::string("mh_layer_decode: ") + mh_status_string(s);
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
        const double bytes = it * static_cast<double>(weights_bytes_) + B * keys * kv_bytes_per_token_;
        report(st, flops, bytes, B * it);
        if (it > 0) st.counters["kv_len"] = keys / it;
    }

private:
    bool do_setup() override {
        if (!build_layer()) return false;
        const int B = c_.batch, M = c_.n_kv;
        mh_kv_cache* cache = nullptr;
        mh_status s = mh_kv_cache_create(layer_.get(), B, M + c_.iterations, c_.kv_dtype, &cache);
        if (s != MH_OK) return fail("mh_kv_cache_create", s);
        cache_.reset(cache);
        kv_bytes_per_token_ = mh_kv_cache_bytes_per_token(cache);

        chunk_ = std::max(1, std::min(256, M - 1));
        size_t ws1 = 0, wsc = 0;
        s = mh_layer_decode_workspace_size(layer_.get(), B, 1, &ws1);
        if (s != MH_OK) return fail("mh_layer_decode_workspace_size", s);
        s = mh_layer_decode_workspace_size(layer_.get(), B, chunk_, &wsc);
        if (s != MH_OK) return fail("mh_layer_decode_workspace_size", s);
        workspace_bytes_ = ws1;
        ws_ = AlignedBuffer(std::max(ws1, wsc));

        // The prompt: x_[b][t][:] for t < M; the timed token: xtok_[b][:].
        x_.resize(static_cast<size_t>(B) * M * dm_);
        Rng rng(0x7865u);
        rng.fill(x_.data(), x_.size());
        xtok_.resize(static_cast<size_t>(B) * dm_);
        rng.fill(xtok_.data(), xtok_.size());
        xchunk_.resize(static_cast<size_t>(B) * chunk_ * dm_);
        out_ = AlignedBuffer(static_cast<size_t>(B) * chunk_ * dm_ * sizeof(float));
        if (!fill()) return false;

        // out_ holds the output of the last prompt token (position M - 1).
        std::vector<double> ref;
        ref_layer_rows(cfg_, w_, x_.data(), M, {M - 1}, ref);
        ErrorAccumulator acc;
        for (int c = 0; c < dm_; c++) acc.add(out_.as<float>()[c], ref[static_cast<size_t>(c)]);
        err_ = acc.result();
        return true;
    }

    // Reset, then decode the M prompt tokens: M - 1 in chunks, the last one alone.
    bool fill() {
        const int B = c_.batch, M = c_.n_kv;
        mh_kv_cache_reset(cache_.get());
        int t = 0;
        while (t < M) {
            const int n = t < M - 1 ? std::min(chunk_, M - 1 - t) : 1;
            for (int b = 0; b < B; b++)
                std::copy_n(&x_[(static_cast<size_t>(b) * M + t) * dm_], static_cast<size_t>(n) * dm_,
                            &xchunk_[static_cast<size_t>(b) * n * dm_]);
            const mh_status s = mh_layer_decode(layer_.get(), cache_.get(), B, n, xchunk_.data(),
                                                out_.as<float>(), ws_.data(), ws_.size());
            if (s != MH_OK) return fail("mh_layer_decode (filling the cache)", s);
            t += n;
        }
        if (mh_kv_cache_length(cache_.get()) != M) {
            error_ = "the KV cache length after filling is " + std::to_string(mh_kv_cache_length(cache_.get())) +
                     ", expected " + std::to_string(M);
            return false;
        }
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

std::unique_ptr<Fixture> make_fixture(const CaseSpec& c) {
    switch (c.mode) {
    case Mode::Prefill:
    case Mode::Decode: return std::make_unique<AttentionFixture>(c);
    case Mode::Layer: return std::make_unique<LayerFixture>(c);
    case Mode::DecodeLayer: return std::make_unique<DecodeLayerFixture>(c);
    }
    return nullptr;
}

void run_case(const CaseSpec& c, const std::string& name, benchmark::State& st) {
    if (!g_current || g_current_name != name) {
        g_current.reset();  // free the previous case first
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
CaseSpec prefill(int n, int h, int hkv, int d) {
    CaseSpec c;
    c.mode = Mode::Prefill;
    c.n_q = c.n_kv = n;
    c.n_heads = h;
    c.n_kv_heads = hkv;
    c.head_dim = d;
    return c;
}
CaseSpec layer(int n, int h, int hkv, int d) {
    CaseSpec c = prefill(n, h, hkv, d);
    c.mode = Mode::Layer;
    return c;
}
CaseSpec decode(int m, int h, int hkv, int d) {
    CaseSpec c = prefill(1, h, hkv, d);
    c.mode = Mode::Decode;
    c.n_kv = m;
    return c;
}
CaseSpec decode_layer(int m, int h, int hkv, int d, int iterations) {
    CaseSpec c = decode(m, h, hkv, d);
    c.mode = Mode::DecodeLayer;
    c.iterations = iterations;
    return c;
}
CaseSpec with_threads(CaseSpec c, int t) {
    c.threads = t;
    return c;
}
CaseSpec with_batch(CaseSpec c, int b) {
    c.batch = b;
    return c;
}
CaseSpec with_dtype(CaseSpec c, mh_dtype dt) {
    c.kv_dtype = dt;
    return c;
}

// One ISA's cases. Shapes are sized for the scalar kernels on 2 cores; variants per shape are
// MHA (Hkv = H), GQA (Hkv = H/4) and MQA (Hkv = 1).
std::vector<CaseSpec> suite_for_isa(bool quick) {
    std::vector<CaseSpec> v;
    auto variants = [&v](auto make, int h) {
        std::vector<int> hkvs = {h};            // MHA
        if (h / 4 > 1) hkvs.push_back(h / 4);   // GQA
        if (h > 1) hkvs.push_back(1);           // MQA
        for (int hkv : hkvs) v.push_back(make(hkv));
    };
    if (quick) {
        variants([](int hkv) { return prefill(64, 8, hkv, 32); }, 8);
        v.push_back(with_threads(prefill(64, 8, 2, 32), 2));
        v.push_back(with_dtype(prefill(64, 8, 2, 32), MH_DTYPE_F16));
        variants([](int hkv) { return layer(64, 8, hkv, 32); }, 8);
        v.push_back(with_threads(layer(64, 8, 2, 32), 2));
        variants([](int hkv) { return decode(256, 8, hkv, 32); }, 8);
        v.push_back(with_threads(decode(256, 8, 2, 32), 2));
        v.push_back(with_dtype(decode(256, 8, 2, 32), MH_DTYPE_F16));
        v.push_back(decode_layer(128, 8, 2, 32, 32));
        v.push_back(with_threads(decode_layer(128, 8, 2, 32, 32), 2));
        return v;
    }
    // prefill: attention core, causal
    variants([](int hkv) { return prefill(256, 8, hkv, 64); }, 8);
    variants([](int hkv) { return prefill(512, 32, hkv, 128); }, 32);
    v.push_back(with_threads(prefill(512, 32, 8, 128), 2));
    v.push_back(with_dtype(prefill(256, 8, 2, 64), MH_DTYPE_F16));
    // layer: the whole forward, causal self-attention, d_model = H*D = 1024
    variants([](int hkv) { return layer(256, 16, hkv, 64); }, 16);
    v.push_back(layer(512, 16, 4, 64));
    v.push_back(with_threads(layer(512, 16, 4, 64), 2));
    // decode core: one query over M keys
    for (int m : {1024, 4096}) variants([m](int hkv) { return decode(m, 32, hkv, 128); }, 32);
    v.push_back(with_threads(decode(4096, 32, 32, 128), 2));
    v.push_back(with_threads(decode(4096, 32, 8, 128), 2));
    v.push_back(with_dtype(decode(4096, 32, 8, 128), MH_DTYPE_F16));
    v.push_back(with_dtype(decode(4096, 32, 8, 128), MH_DTYPE_BF16));
    v.push_back(with_batch(decode(1024, 32, 8, 128), 4));
    // decode_layer: a token through the layer with its KV cache. Filling the cache is a full
    // causal prefill (for M = 4096 with the scalar kernels: ~25 s on one thread), so M = 4096
    // runs only on 2 threads, where the fill is quickest; 1 vs 2 threads is compared at 1024.
    v.push_back(decode_layer(1024, 16, 16, 64, 64));
    v.push_back(decode_layer(1024, 16, 4, 64, 64));
    v.push_back(with_threads(decode_layer(1024, 16, 4, 64, 64), 2));
    v.push_back(with_threads(decode_layer(4096, 16, 4, 64, 128), 2));
    return v;
}

}  // namespace

const char* mode_name(Mode mode) {
    switch (mode) {
    case Mode::Prefill: return "prefill";
    case Mode::Layer: return "layer";
    case Mode::Decode: return "decode";
    case Mode::DecodeLayer: return "decode_layer";
    }
    return "unknown";
}

std::string variant_name(const CaseSpec& c) {
    if (c.n_kv_heads == c.n_heads) return "mha";
    if (c.n_kv_heads == 1) return "mqa";
    return "gqa" + std::to_string(c.n_kv_heads);
}

std::string case_name(const CaseSpec& c) {
    std::string shape = c.batch > 1 ? "B" + std::to_string(c.batch) + "_" : "";
    if (c.mode == Mode::Prefill || c.mode == Mode::Layer)
        shape += "N" + std::to_string(c.n_q) + "_M" + std::to_string(c.n_kv) + "_";
    else
        shape += "M" + std::to_string(c.n_kv) + "_";
    shape += "H" + std::to_string(c.n_heads) + "_D" + std::to_string(c.head_dim);
    return std::string(mode_name(c.mode)) + "/" + variant_name(c) + "/" + shape + "/" +
           dtype_name(c.kv_dtype) + "/" + mh_isa_name(c.isa) + "/threads:" + std::to_string(c.threads);
}

std::vector<CaseSpec> make_suite(bool quick) {
    std::vector<CaseSpec> out;
    for (int i = 1; i < MH_ISA_COUNT; i++) {
        const mh_isa isa = static_cast<mh_isa>(i);
        if (!mh_isa_supported(isa)) continue;
        for (CaseSpec c : suite_for_isa(quick)) {
            c.isa = isa;
            out.push_back(c);
        }
    }
    return out;
}

void register_cases(const std::vector<CaseSpec>& cases, bool quick) {
    for (const CaseSpec& c : cases) {
        const std::string name = case_name(c);
        benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
            name.c_str(), [c, name](benchmark::State& st) { run_case(c, name, st); });
        b->UseRealTime()->Unit(benchmark::kMillisecond);
        if (c.mode == Mode::DecodeLayer)
            b->Iterations(c.iterations);
        else if (quick)
            b->MinTime(0.05);
    }
}

void release_fixtures() {
    g_current.reset();
    g_current_name.clear();
}

}  // namespace mhb
