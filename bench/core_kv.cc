#include "core_kv.h"

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

}  // namespace mhb
