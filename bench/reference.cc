#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "bench_util.h"

namespace mhb {
namespace {

// dot(a, b) in double with four partial sums (the order differs from a plain loop by far less
// than float rounding, and it is about four times faster).
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

// Turns scores s[0..n) into softmax probabilities in place (n >= 1).
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

void ref_attention_causal(const mh_attn_problem& p, const std::vector<int>& heads,
                          std::vector<double>& out) {
    const int B = p.batch, N = p.n_q, M = p.n_kv, H = p.n_heads, Hkv = p.n_kv_heads;
    const int D = p.head_dim_qk, Dv = p.head_dim_v;
    const int nh = static_cast<int>(heads.size());
    const int group = H / Hkv;
    const double scale = p.scale != 0.0f ? static_cast<double>(p.scale) : 1.0 / std::sqrt(static_cast<double>(D));
    out.assign(static_cast<size_t>(B) * N * nh * Dv, 0.0);

    std::vector<double> k(static_cast<size_t>(M) * D), v(static_cast<size_t>(M) * Dv);
    std::vector<double> q(static_cast<size_t>(D)), s(static_cast<size_t>(M));
    const float* Q = static_cast<const float*>(p.q.data);
    for (int b = 0; b < B; b++) {
        int loaded_kvh = -1;
        for (int hi = 0; hi < nh; hi++) {
            const int h = heads[static_cast<size_t>(hi)];
            const int kvh = h / group;
            if (kvh != loaded_kvh) {  // this KV head's K and V, decoded to double once
                for (int j = 0; j < M; j++) {
                    const ptrdiff_t kb = b * p.k.stride_batch + j * p.k.stride_token + kvh * p.k.stride_head;
                    const ptrdiff_t vb = b * p.v.stride_batch + j * p.v.stride_token + kvh * p.v.stride_head;
                    for (int d = 0; d < D; d++)
                        k[static_cast<size_t>(j) * D + d] = load_as_double(p.k.data, p.k_dtype, kb + d);
                    for (int d = 0; d < Dv; d++)
                        v[static_cast<size_t>(j) * Dv + d] = load_as_double(p.v.data, p.v_dtype, vb + d);
                }
                loaded_kvh = kvh;
            }
            for (int i = 0; i < N; i++) {
                const long pos = static_cast<long>(M) - N + i;  // MH_Q_OFFSET_END
                const int n_keys = static_cast<int>(std::min<long>(pos + 1, M));
                double* o = &out[((static_cast<size_t>(b) * N + i) * nh + hi) * Dv];
                if (n_keys <= 0) continue;  // no kept key: zero row
                const float* qrow = Q + b * p.q.stride_batch + i * p.q.stride_token + h * p.q.stride_head;
                for (int d = 0; d < D; d++) q[static_cast<size_t>(d)] = qrow[d];
                for (int j = 0; j < n_keys; j++)
                    s[static_cast<size_t>(j)] = scale * dot_d(q.data(), &k[static_cast<size_t>(j) * D], D);
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

void ref_layer_rows(const mh_layer_config& cfg, const mh_layer_weights& w, const float* x, int T,
                    const std::vector<int>& rows, std::vector<double>& out) {
    const int dm = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads, D = cfg.head_dim;
    const int Dv = cfg.head_dim_v, group = H / Hkv;
    const int kw = Hkv * D, vw = Hkv * Dv, qw = H * D, ow = H * Dv;
    const double scale = cfg.scale != 0.0f ? static_cast<double>(cfg.scale) : 1.0 / std::sqrt(static_cast<double>(D));
    int R = 0;
    for (int r : rows) R = std::max(R, r + 1);
    R = std::min(R, T);

    // K and V projections of every token up to the last requested row.
    std::vector<double> K(static_cast<size_t>(R) * kw), V(static_cast<size_t>(R) * vw);
    for (int j = 0; j < R; j++) {
        const float* xr = x + static_cast<size_t>(j) * dm;
        for (int o = 0; o < kw; o++)
            K[static_cast<size_t>(j) * kw + o] = dot_d(xr, w.w_k + static_cast<size_t>(o) * dm, dm);
        for (int o = 0; o < vw; o++)
            V[static_cast<size_t>(j) * vw + o] = dot_d(xr, w.w_v + static_cast<size_t>(o) * dm, dm);
    }

    out.assign(rows.size() * static_cast<size_t>(dm), 0.0);
    std::vector<double> q(static_cast<size_t>(qw)), attn(static_cast<size_t>(ow)), s(static_cast<size_t>(R));
    for (size_t ri = 0; ri < rows.size(); ri++) {
        const int r = rows[ri];
        const float* xr = x + static_cast<size_t>(r) * dm;
        for (int o = 0; o < qw; o++) q[static_cast<size_t>(o)] = dot_d(xr, w.w_q + static_cast<size_t>(o) * dm, dm);
        std::fill(attn.begin(), attn.end(), 0.0);
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            for (int j = 0; j <= r; j++)
                s[static_cast<size_t>(j)] =
                    scale * dot_d(&q[static_cast<size_t>(h) * D], &K[static_cast<size_t>(j) * kw + static_cast<size_t>(kvh) * D], D);
            softmax_inplace(s.data(), r + 1);
            double* a = &attn[static_cast<size_t>(h) * Dv];
            for (int j = 0; j <= r; j++) {
                const double* vr = &V[static_cast<size_t>(j) * vw + static_cast<size_t>(kvh) * Dv];
                for (int d = 0; d < Dv; d++) a[d] += s[static_cast<size_t>(j)] * vr[d];
            }
        }
        for (int c = 0; c < dm; c++)
            out[ri * static_cast<size_t>(dm) + c] = dot_d(attn.data(), w.w_o + static_cast<size_t>(c) * ow, ow);
    }
}

}  // namespace mhb
