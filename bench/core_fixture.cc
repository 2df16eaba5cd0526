// The attention-core fixture: prefill and decode through mh_attention (counters: cases.cc).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "blas_baseline.h"
#include "core_kv.h"
#include "fixture.h"
#include "machine_limits.h"
#include "oracle_moh.h"
#include "reference.h"

namespace mhb {
namespace {

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
        const bool pooled = decode && !suite_options().quick && !nested_ && !suite_options().interleave;
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
        opt_.compute = c_.compute;
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

}  // namespace

std::unique_ptr<Fixture> make_core_fixture(const CaseSpec& c) { return std::make_unique<CoreFixture>(c); }

}  // namespace mhb
