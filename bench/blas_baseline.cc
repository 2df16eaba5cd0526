#include "blas_baseline.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "model.h"

#if defined(MHB_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace mhb {

#if defined(MHB_HAVE_CBLAS)

bool blas_available() { return true; }

std::string blas_description() {
#if defined(MHB_HAVE_OPENBLAS)
    const char* c = openblas_get_config();
    return std::string("OpenBLAS (") + (c ? c : "?") + ")";
#else
    return "CBLAS (pkg-config cblas)";
#endif
}

void blas_set_threads(int threads) {
#if defined(MHB_HAVE_OPENBLAS)
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    openblas_set_num_threads(threads);
#else
    (void)threads;
#endif
}

size_t blas_attention_scratch_floats(const mh_attn_problem& p) {
    return static_cast<size_t>(p.n_q) * static_cast<size_t>(p.n_kv);
}

void blas_attention(const mh_attn_problem& p, bool causal, float* S) {
    const int B = p.batch, N = p.n_q, M = p.n_kv, H = p.n_heads, g = p.n_heads / p.n_kv_heads;
    const int D = p.head_dim_qk, Dv = p.head_dim_v;
    const float scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(D));
    const float* Q = static_cast<const float*>(p.q.data);
    const float* K = static_cast<const float*>(p.k.data);
    const float* V = static_cast<const float*>(p.v.data);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float* qh = Q + b * p.q.stride_batch + h * p.q.stride_head;
            const float* kh = K + b * p.k.stride_batch + (h / g) * p.k.stride_head;
            const float* vh = V + b * p.v.stride_batch + (h / g) * p.v.stride_head;
            float* oh = p.o.data + b * p.o.stride_batch + h * p.o.stride_head;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, D, scale, qh, static_cast<int>(p.q.stride_token), kh,
                        static_cast<int>(p.k.stride_token), 0.0f, S, M);
            for (int i = 0; i < N; i++) {
                float* s = S + static_cast<size_t>(i) * M;
                const int keep = causal ? std::max(0, std::min(M, M - N + i + 1)) : M;
                float mx = -INFINITY;
                for (int j = 0; j < keep; j++) mx = std::max(mx, s[j]);
                float sum = 0.0f;
                for (int j = 0; j < keep; j++) {
                    s[j] = std::exp(s[j] - mx);
                    sum += s[j];
                }
                const float inv = keep > 0 ? 1.0f / sum : 0.0f;
                for (int j = 0; j < keep; j++) s[j] *= inv;
                for (int j = keep; j < M; j++) s[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Dv, M, 1.0f, S, M, vh,
                        static_cast<int>(p.v.stride_token), 0.0f, oh, static_cast<int>(p.o.stride_token));
        }
    }
}

size_t blas_layer_scratch_floats(const LayerWeights& w, int batch, int n_q, int n_kv) {
    const size_t B = static_cast<size_t>(batch), N = static_cast<size_t>(n_q), M = static_cast<size_t>(n_kv);
    return B * N * static_cast<size_t>(w.n_heads) * (w.head_dim + w.head_dim_v)              // Q, A
           + B * M * static_cast<size_t>(w.n_kv_heads) * (w.head_dim + w.head_dim_v)         // K, V
           + N * M;                                                                           // S
}

namespace {
// y[rows, n_out] = x[rows, in] W[n_out, in]^T (+ b)
void project(const float* x, int rows, int in, const float* W, const std::vector<float>& b, int n_out, float* y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_out, in, 1.0f, x, in, W, in, 0.0f, y, n_out);
    if (!b.empty())
        for (int r = 0; r < rows; r++)
            for (int o = 0; o < n_out; o++) y[static_cast<size_t>(r) * n_out + o] += b[static_cast<size_t>(o)];
}
}  // namespace

void blas_layer_forward(const LayerWeights& w, int batch, int n_q, int n_kv, const float* xq, const float* xk,
                        const float* xv, bool causal, float* out, float* scratch) {
    const int H = w.n_heads, Hkv = w.n_kv_heads, D = w.head_dim, Dv = w.head_dim_v;
    const size_t BN = static_cast<size_t>(batch) * n_q, BM = static_cast<size_t>(batch) * n_kv;
    float* Q = scratch;
    float* A = Q + BN * H * D;
    float* K = A + BN * H * Dv;
    float* V = K + BM * Hkv * D;
    float* S = V + BM * Hkv * Dv;
    project(xq, static_cast<int>(BN), w.d_model, w.wq.data(), w.bq, H * D, Q);
    project(xk, static_cast<int>(BM), w.kdim, w.wk.data(), w.bk, Hkv * D, K);
    project(xv, static_cast<int>(BM), w.vdim, w.wv.data(), w.bv, Hkv * Dv, V);
    mh_attn_problem p{};
    p.batch = batch, p.n_q = n_q, p.n_kv = n_kv, p.n_heads = H, p.n_kv_heads = Hkv;
    p.head_dim_qk = D, p.head_dim_v = Dv;
    p.q.data = Q, p.q.stride_batch = static_cast<ptrdiff_t>(n_q) * H * D;
    p.q.stride_token = static_cast<ptrdiff_t>(H) * D, p.q.stride_head = D;
    p.k.data = K, p.k.stride_batch = static_cast<ptrdiff_t>(n_kv) * Hkv * D;
    p.k.stride_token = static_cast<ptrdiff_t>(Hkv) * D, p.k.stride_head = D;
    p.v.data = V, p.v.stride_batch = static_cast<ptrdiff_t>(n_kv) * Hkv * Dv;
    p.v.stride_token = static_cast<ptrdiff_t>(Hkv) * Dv, p.v.stride_head = Dv;
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o.data = A;
    p.o.stride_batch = static_cast<ptrdiff_t>(n_q) * H * Dv;
    p.o.stride_token = static_cast<ptrdiff_t>(H) * Dv;
    p.o.stride_head = Dv;
    blas_attention(p, causal, S);
    project(A, static_cast<int>(BN), H * Dv, w.wo.data(), w.bo, w.d_model, out);
}

#else  // no CBLAS: nothing is registered that would call these

bool blas_available() { return false; }
std::string blas_description() { return "not built (pkg-config found neither openblas nor cblas)"; }
void blas_set_threads(int) {}
size_t blas_attention_scratch_floats(const mh_attn_problem&) { return 0; }
void blas_attention(const mh_attn_problem&, bool, float*) { std::abort(); }
size_t blas_layer_scratch_floats(const LayerWeights&, int, int, int) { return 0; }
void blas_layer_forward(const LayerWeights&, int, int, int, const float*, const float*, const float*, bool, float*, float*) {
    std::abort();
}

#endif

}  // namespace mhb
