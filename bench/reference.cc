#include "reference.h"

#include "oracle_dcmha.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "bench_util.h"
#include "model.h"
#include "blas_baseline.h"
#include "oracle_overlap.h"
#include "oracle_collab.h"

#if defined(MHB_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace mhb {
namespace {

// dot(a, b) in double with four partial sums.
template <class A, class B>
double dot_d(const A* a, const B* b, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
        s1 += static_cast<double>(a[i + 1]) * static_cast<double>(b[i + 1]);
        s2 += static_cast<double>(a[i + 2]) * static_cast<double>(b[i + 2]);
        s3 += static_cast<double>(a[i + 3]) * static_cast<double>(b[i + 3]);
    }
    for (; i < n; i++) s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return (s0 + s1) + (s2 + s3);
}

// Scores s[0..n) -> softmax probabilities in place (n >= 1).
void softmax_inplace(double* s, int n) {
    double m = s[0];
    for (int j = 1; j < n; j++) m = std::max(m, s[j]);
    double l = 0.0;
    for (int j = 0; j < n; j++) {
        s[j] = std::exp(s[j] - m);
        l += s[j];
    }
    for (int j = 0; j < n; j++) s[j] /= l;
}

}  // namespace

void ref_attention(const mh_attn_problem& p, bool causal, const std::vector<int>& heads, const std::vector<int>& rows,
                   std::vector<double>& out) {
    const int B = p.batch, N = p.n_q, M = p.n_kv, H = p.n_heads, Hkv = p.n_kv_heads;
    const int D = p.head_dim_qk, Dv = p.head_dim_v;
    const size_t nh = heads.size(), nr = rows.size();
    const int group = H / Hkv;
    const double scale = p.scale != 0.0f ? static_cast<double>(p.scale) : 1.0 / std::sqrt(static_cast<double>(D));
    out.assign(static_cast<size_t>(B) * nr * nh * Dv, 0.0);
    // keys any requested row can see
    int R = M;
    if (causal && !rows.empty()) R = static_cast<int>(std::min<long>(M, static_cast<long>(M) - N + rows.back() + 1));
    if (R < 0) R = 0;

    std::vector<double> k(static_cast<size_t>(R) * D), v(static_cast<size_t>(R) * Dv);
    std::vector<double> q(static_cast<size_t>(D)), s(static_cast<size_t>(std::max(R, 1)));
    const float* Q = static_cast<const float*>(p.q.data);
    for (int b = 0; b < B; b++) {
        int loaded_kvh = -1;
        for (size_t hi = 0; hi < nh; hi++) {
            const int h = heads[hi];
            const int kvh = h / group;
            if (kvh != loaded_kvh) {  // this KV head's K and V, decoded to double once
                // the stored values, exactly (f16/bf16 widen without rounding; int8 is scale * q)
                for (int j = 0; j < R; j++) {
                    load_row(p.k, p.k_dtype, b, j, kvh, &k[static_cast<size_t>(j) * D], static_cast<size_t>(D));
                    load_row(p.v, p.v_dtype, b, j, kvh, &v[static_cast<size_t>(j) * Dv], static_cast<size_t>(Dv));
                }
                loaded_kvh = kvh;
            }
            for (size_t ri = 0; ri < nr; ri++) {
                const int i = rows[ri];
                const int n_keys = causal ? static_cast<int>(std::min<long>(static_cast<long>(M) - N + i + 1, M)) : M;
                double* o = &out[((static_cast<size_t>(b) * nr + ri) * nh + hi) * Dv];
                if (n_keys <= 0) continue;  // no kept key: zero row
                const float* qrow = Q + b * p.q.stride_batch + i * p.q.stride_token + h * p.q.stride_head;
                for (int d = 0; d < D; d++) q[static_cast<size_t>(d)] = qrow[d];
                for (int j = 0; j < n_keys; j++) s[static_cast<size_t>(j)] = scale * dot_d(q.data(), &k[static_cast<size_t>(j) * D], D);
                softmax_inplace(s.data(), n_keys);
                for (int j = 0; j < n_keys; j++) {
                    const double pj = s[static_cast<size_t>(j)];
                    const double* vr = &v[static_cast<size_t>(j) * Dv];
                    for (int d = 0; d < Dv; d++) o[d] += pj * vr[d];
                }
            }
        }
    }
}

void ref_project(const float* x, int T, int in, const float* w, const float* b, int n_out, std::vector<double>& y) {
    y.assign(static_cast<size_t>(T) * n_out, 0.0);
    if (T <= 0) return;
#if defined(MHB_HAVE_CBLAS)
    std::vector<double> xd(x, x + static_cast<size_t>(T) * in), wd(w, w + static_cast<size_t>(n_out) * in);
    blas_set_threads(0);  // untimed: all processors
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, in, 1.0, xd.data(), in, wd.data(), in, 0.0, y.data(),
                n_out);
#else
    std::vector<double> xr(static_cast<size_t>(in));
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < in; k++) xr[static_cast<size_t>(k)] = x[static_cast<size_t>(t) * in + k];
        for (int o = 0; o < n_out; o++) y[static_cast<size_t>(t) * n_out + o] = dot_d(xr.data(), w + static_cast<size_t>(o) * in, in);
    }
#endif
    if (b)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < n_out; o++) y[static_cast<size_t>(t) * n_out + o] += b[o];
}

namespace {

// Overlapping heads: the tests' double oracle (tests/support/oracle_overlap.c) on the requested
// query rows, each as a one-query call over all keys (causal: at its own position).
void overlap_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* xq, int n_q, const float* xk,
                  const float* xv, int n_kv, bool causal, const std::vector<int>& rows, std::vector<double>& out) {
    mh_layer_config c = cfg;
    if (c.scale == 0.0f) c.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim + 2 * config_overlap(c)));
    const size_t dm = static_cast<size_t>(cfg.d_model);
    out.assign(rows.size() * dm, 0.0);
    std::vector<float> q(rows.size() * dm);
    for (size_t ri = 0; ri < rows.size(); ri++) std::copy_n(xq + static_cast<size_t>(rows[ri]) * dm, dm, &q[ri * dm]);
    mh_attn_options opt = mh_attn_options_default();
    mh_forward_args a{};
    a.batch = 1, a.n_kv = n_kv, a.key = xk, a.value = xv, a.opt = &opt;
    if (!causal) {  // queries are independent: all rows in one call
        a.n_q = static_cast<int>(rows.size()), a.query = q.data();
        oracle_overlap_forward(&c, &w, &a, out.data());
        return;
    }
    opt.causal = 1;
    for (size_t ri = 0; ri < rows.size(); ri++) {
        opt.q_offset = n_kv - n_q + rows[ri];
        a.n_q = 1, a.query = &q[ri * dm];
        oracle_overlap_forward(&c, &w, &a, &out[ri * dm]);
    }
}

// CollabHead rows from the test oracle (tests/support/oracle_collab.c): the requested query
// rows against the first R keys as one cross-attention call, causality as an additive mask.
void collab_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* xq, int n_q,
                        const float* xk, const float* xv, int n_kv, bool causal, const std::vector<int>& rows,
                        std::vector<double>& out) {
    const int dm = cfg.d_model, nr = static_cast<int>(rows.size());
    int R = n_kv;
    if (causal) {
        int last = 0;
        for (int r : rows) last = std::max(last, r);
        R = std::max(1, std::min(n_kv, n_kv - n_q + last + 1));
    }
    std::vector<float> q(static_cast<size_t>(nr) * dm), mask(static_cast<size_t>(nr) * R, 0.0f);
    for (int i = 0; i < nr; i++) {
        std::copy(xq + static_cast<size_t>(rows[i]) * dm, xq + static_cast<size_t>(rows[i] + 1) * dm, q.begin() + static_cast<size_t>(i) * dm);
        for (int j = n_kv - n_q + rows[i] + 1; causal && j < R; j++) mask[static_cast<size_t>(i) * R + j] = -INFINITY;
    }
    mh_layer_config c = cfg;
    if (c.scale == 0.0f) c.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    mh_attn_options opt = mh_attn_options_default();
    opt.q_offset = 0, opt.mask = mask.data(), opt.mask_stride_row = R;
    mh_forward_args a = {};
    a.batch = 1, a.n_q = nr, a.n_kv = R, a.query = q.data(), a.key = xk, a.value = xv, a.opt = &opt;
    out.assign(static_cast<size_t>(nr) * dm, 0.0);
    oracle_collab_forward(&c, &w, &a, ORACLE_MIX_QUERY, out.data(), nullptr);
}

// QK-norm and rotary (docs/api.md, "Positions") in double of `heads` heads of D at x, at
// position pos: RMSNorm with `norm` (when cfg.qk_norm), then each pair turned by the cos/sin of
// the f32 angle fl32(pos * inv_freq[i]) (the default table in f32, as the library states it).
void ref_position(const mh_layer_config& cfg, const float* norm, int heads, double pos, double* x) {
    const int D = cfg.head_dim, r = cfg.rotary.rotary_dim, half = r / 2;
    const bool inter = cfg.rotary.layout == MH_ROTARY_INTERLEAVED;
    for (int h = 0; h < heads; h++, x += D) {
        if (cfg.qk_norm) {
            double ss = 0;
            for (int j = 0; j < D; j++) ss += x[j] * x[j];
            const double s = 1.0 / std::sqrt(ss / D + cfg.qk_norm_eps);
            for (int j = 0; j < D; j++) x[j] *= s * norm[j];
        }
        for (int i = 0; cfg.rotary.layout != MH_ROTARY_NONE && i < half; i++) {
            const float inv = 1.0f / std::pow(cfg.rotary.theta, static_cast<float>(2 * i) / static_cast<float>(r));
            const double a = static_cast<double>(static_cast<float>(pos) * inv), c = std::cos(a), s = std::sin(a);
            double& xv = x[inter ? 2 * i : i];
            double& yv = x[inter ? 2 * i + 1 : i + half];
            const double x0 = xv;
            xv = x0 * c - yv * s, yv = x0 * s + yv * c;
        }
    }
}

}  // namespace

void ref_layer_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* xq, int n_q, const float* xk,
                    const float* xv, int n_kv, bool causal, const std::vector<int>& rows, std::vector<double>& out) {
    if (cfg.variant == MH_VARIANT_OVERLAP) return overlap_rows(cfg, w, xq, n_q, xk, xv, n_kv, causal, rows, out);
    if (cfg.variant == MH_VARIANT_COLLAB) return collab_rows(cfg, w, xq, n_q, xk, xv, n_kv, causal, rows, out);
    if (cfg.variant == MH_VARIANT_DCMHA) {  // self-attention only: xq = xk = xv, n_q = n_kv
        out.assign(rows.size() * static_cast<size_t>(cfg.d_model), 0.0);
        oracle_dcmha_rows(&cfg, &w, xq, n_kv, causal ? 1 : 0, rows.data(), static_cast<int>(rows.size()),
                          ORACLE_COMPOSE_LOWRANK, out.data());
        return;
    }
    const int dm = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads, D = cfg.head_dim;
    const int Dv = cfg.head_dim_v, group = H / Hkv;
    const int kw = Hkv * D, vw = Hkv * Dv, qw = H * D, ow = H * Dv;
    const double scale = cfg.scale != 0.0f ? static_cast<double>(cfg.scale) : 1.0 / std::sqrt(static_cast<double>(D));
    const bool bias = cfg.bias != 0;
    // keys any requested row can see
    int R = n_kv;
    if (causal) {
        int last = 0;
        for (int r : rows) last = std::max(last, r);
        R = std::max(0, std::min(n_kv, n_kv - n_q + last + 1));
    }
    std::vector<double> K, V;
    ref_project(xk, R, cfg.kdim, w.w_k, bias ? w.b_k : nullptr, kw, K);
    ref_project(xv, R, cfg.vdim, w.w_v, bias ? w.b_v : nullptr, vw, V);
    // positions (rotary, QK-norm; the layer config's resolved table): key j at j, query r at
    // n_kv - n_q + r (self-attention and a decode's new tokens alike)
    const bool positions = cfg.rotary.layout != MH_ROTARY_NONE || cfg.qk_norm;
    for (int j = 0; positions && j < R; j++) ref_position(cfg, w.k_norm, Hkv, j, &K[static_cast<size_t>(j) * kw]);

    out.assign(rows.size() * static_cast<size_t>(dm), 0.0);
    std::vector<double> q(static_cast<size_t>(qw)), attn(static_cast<size_t>(ow)), s(static_cast<size_t>(std::max(R, 1)));
    for (size_t ri = 0; ri < rows.size(); ri++) {
        const int r = rows[ri];
        const float* xr = xq + static_cast<size_t>(r) * dm;
        for (int o = 0; o < qw; o++)
            q[static_cast<size_t>(o)] = dot_d(xr, w.w_q + static_cast<size_t>(o) * dm, dm) + (bias ? w.b_q[o] : 0.0);
        if (positions) ref_position(cfg, w.q_norm, H, n_kv - n_q + r, q.data());
        std::fill(attn.begin(), attn.end(), 0.0);
        const int n_keys = causal ? std::min(n_kv, n_kv - n_q + r + 1) : n_kv;
        for (int h = 0; h < H && n_keys > 0; h++) {
            const int kvh = h / group;
            for (int j = 0; j < n_keys; j++)
                s[static_cast<size_t>(j)] =
                    scale * dot_d(&q[static_cast<size_t>(h) * D], &K[static_cast<size_t>(j) * kw + static_cast<size_t>(kvh) * D], D);
            softmax_inplace(s.data(), n_keys);
            double* a = &attn[static_cast<size_t>(h) * Dv];
            for (int j = 0; j < n_keys; j++) {
                const double* vr = &V[static_cast<size_t>(j) * vw + static_cast<size_t>(kvh) * Dv];
                for (int d = 0; d < Dv; d++) a[d] += s[static_cast<size_t>(j)] * vr[d];
            }
        }
        for (int c = 0; c < dm; c++)
            out[ri * static_cast<size_t>(dm) + c] = dot_d(attn.data(), w.w_o + static_cast<size_t>(c) * ow, ow) + (bias ? w.b_o[c] : 0.0);
    }
}

}  // namespace mhb
