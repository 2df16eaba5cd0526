// The layer-API fixtures: forward (layer, cross, causal prefill with a d_model) and decode
// through the layer with its KV cache (counters: cases.cc).
#include <algorithm>
#include <cmath>

#include "blas_baseline.h"
#include "fixture.h"
#include "oracle_moh.h"
#include "reference.h"

namespace mhb {
namespace {

class LayerFixtureBase : public Fixture {
public:
    using Fixture::Fixture;

protected:
    // The variant's weights derived from the base layer, and (library) the layer object.
    bool build_layer() {
        w_ = variant_->derive(base_layer(c_), kv_);
        cfg_ = layer_config(*variant_, w_);
        cfg_.compute = c_.compute;
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
            blas_layer_forward(w_, B, N, M, xq_.data(), xk(), xk(), opt_.causal != 0, out_.as<float>(), ws_.as<float>());
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
        mh_decode_args args{};
        args.batch = c_.batch, args.n_new = 1, args.x = xtok_.data(), args.out = out_.as<float>();
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
        mh_kv_cache_config kc = mh_kv_cache_config_default();
        kc.max_seqs = B, kc.capacity = M + c_.iterations * repetitions(suite_options()), kc.dtype = c_.kv_dtype;
        kc.block_size = c_.kv_block;  // 0: contiguous
        mh_status s = mh_kv_cache_create_ex(layer_.get(), &kc, &cache);
        if (s != MH_OK) return fail("mh_kv_cache_create_ex", s);
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
                             static_cast<double>(B) * (M + c_.iterations * repetitions(suite_options())) * static_cast<double>(kv_bytes_per_token_);

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
            mh_decode_args args{};
            args.batch = B, args.n_new = n, args.x = xchunk_.data(), args.out = out_.as<float>();
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

}  // namespace

std::unique_ptr<Fixture> make_forward_fixture(const CaseSpec& c) { return std::make_unique<ForwardFixture>(c); }
std::unique_ptr<Fixture> make_decode_layer_fixture(const CaseSpec& c) { return std::make_unique<DecodeLayerFixture>(c); }

}  // namespace mhb
