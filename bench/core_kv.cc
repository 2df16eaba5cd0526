#include "core_kv.h"

#include <vector>

#include "bench_util.h"

namespace mhb {
namespace {
constexpr ptrdiff_t kHeadPad = 32;  // elements between head streams, as the library's KV cache does
}  // namespace

CoreKvLayout core_kv_layout(bool head_major, int B, int M, int Hkv, int D, int o, mh_dtype dtype) {
    CoreKvLayout g;
    g.dtype = dtype;
    g.batch = B, g.n_kv = M;
    const ptrdiff_t width = static_cast<ptrdiff_t>(Hkv) * D + 2 * o;  // a token's K (or V) row
    g.streams = o > 0 ? 1 : Hkv;
    g.row_len = o > 0 ? width : D;
    if (head_major) {
        const ptrdiff_t hs = static_cast<ptrdiff_t>(M) * g.row_len + kHeadPad;  // stream stride
        g.sb = g.streams * hs, g.st = g.row_len, g.row_stride = hs;
        g.sh = o > 0 ? D : hs;
        g.ssb = static_cast<ptrdiff_t>(g.streams) * M, g.sst = 1, g.ssh = M;
    } else {
        g.sb = static_cast<ptrdiff_t>(M) * width, g.st = width, g.sh = D, g.row_stride = D;
        g.ssb = static_cast<ptrdiff_t>(M) * g.streams, g.sst = g.streams, g.ssh = 1;
    }
    if (o > 0) g.ssh = 0;  // every head window of a token row shares the row's scale
    const bool i8 = dtype == MH_DTYPE_I8;
    g.elems = static_cast<size_t>(B) * static_cast<size_t>(g.sb);
    g.n_scales = i8 ? static_cast<size_t>(B) * M * g.streams : 0;
    g.scale_offset = (g.elems * dtype_size(dtype) + 63) / 64 * 64;
    g.bytes = g.scale_offset + g.n_scales * sizeof(float);
    g.token_bytes = static_cast<size_t>(g.streams) * (static_cast<size_t>(g.row_len) * dtype_size(dtype) + (i8 ? sizeof(float) : 0));
    return g;
}

mh_tensor core_kv_view(const CoreKvLayout& g, const void* buf) {
    mh_tensor t = tensor_view(buf, g.sb, g.st, g.sh);
    if (g.dtype == MH_DTYPE_I8) {
        t.scale = reinterpret_cast<const float*>(static_cast<const char*>(buf) + g.scale_offset);
        t.scale_stride_batch = g.ssb, t.scale_stride_token = g.sst, t.scale_stride_head = g.ssh;
    }
    return t;
}

void store_token(const CoreKvLayout& g, void* buf, int b, int j, const float* row) {
    char* base = static_cast<char*>(buf);
    float* scales = reinterpret_cast<float*>(base + g.scale_offset);
    const size_t es = dtype_size(g.dtype);
    for (int s = 0; s < g.streams; s++) {
        const ptrdiff_t at = b * g.sb + j * g.st + s * g.row_stride;
        const ptrdiff_t si = b * g.ssb + j * g.sst + s * g.ssh;
        store_as(g.dtype, row + s * g.row_len, base + at * static_cast<ptrdiff_t>(es), static_cast<size_t>(g.row_len),
                 g.dtype == MH_DTYPE_I8 ? scales + si : nullptr);
    }
}

const std::string& int8_refusal() {
    static const std::string reason = [] {
        const int D = 16;
        std::vector<float> q(D, 0.5f), o(D), scale(1, 1.0f / 127);
        std::vector<int8_t> kv(D, 1);
        mh_attn_problem p{};
        p.batch = p.n_q = p.n_kv = p.n_heads = p.n_kv_heads = 1;
        p.head_dim_qk = p.head_dim_v = D;
        p.q = tensor_view(q.data(), D, D, D);
        p.k = tensor_view(kv.data(), D, D, D);
        p.k.scale = scale.data(), p.k.scale_stride_batch = p.k.scale_stride_token = p.k.scale_stride_head = 1;
        p.v = p.k;
        p.k_dtype = p.v_dtype = MH_DTYPE_I8;
        p.o.data = o.data(), p.o.stride_batch = p.o.stride_token = p.o.stride_head = D;
        mh_context* ctx = nullptr;
        mh_context_config cfg = mh_context_config_default();
        cfg.num_threads = 1;
        mh_status s = mh_context_create(&cfg, &ctx);
        if (s != MH_OK) return std::string("mh_context_create: ") + mh_status_string(s);
        ContextPtr hold(ctx);
        const mh_attn_options opt = mh_attn_options_default();
        size_t ws = 0;
        s = mh_attention_workspace_size(ctx, &p, &opt, &ws);
        if (s != MH_OK) return std::string("mh_attention_workspace_size: ") + mh_status_string(s);
        AlignedBuffer w(ws);
        s = mh_attention(ctx, &p, &opt, w.data(), ws);
        return s == MH_OK ? std::string() : std::string("mh_attention: ") + mh_status_string(s);
    }();
    return reason;
}

}  // namespace mhb
