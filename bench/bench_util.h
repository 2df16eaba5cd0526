// Small helpers shared by the benchmark sources: aligned buffers, a deterministic RNG,
// f16/bf16 storage conversions, RAII handles for the library objects, error statistics.
#ifndef MH_BENCH_UTIL_H
#define MH_BENCH_UTIL_H

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "multihead.h"

namespace mhb {

// ------------------------------------------------------------------ memory
struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

// 64-byte aligned, uninitialised storage (the library wants 64-byte aligned workspaces; the
// tensors get the same alignment so every case starts from the same placement).
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes);
    void* data() const { return ptr_.get(); }
    size_t size() const { return bytes_; }
    template <class T>
    T* as() const { return static_cast<T*>(ptr_.get()); }

private:
    std::unique_ptr<void, FreeDeleter> ptr_;
    size_t bytes_ = 0;
};

// ------------------------------------------------------------------ random numbers
// splitmix64; uniform floats in [-scale, scale). Deterministic for a given seed.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next_u64();
    float uniform(float scale = 1.0f);
    void fill(float* p, size_t n, float scale = 1.0f);

private:
    uint64_t state_;
};

// A counter-based generator: the same (seed, index) always gives the same value in [-1, 1), so a
// tensor element can be recomputed anywhere (e.g. every MHA head of a K/V group when deriving
// the pooled GQA heads) without storing the tensor. 32-bit mixing (lowbias32) so the loops
// that fill big tensors vectorise.
inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
inline uint32_t hash_key(uint64_t seed, uint64_t index) {
    return mix32(static_cast<uint32_t>(seed) * 0x9E3779B9u ^ mix32(static_cast<uint32_t>(index >> 32) + static_cast<uint32_t>(seed >> 32) + 0x632BE5ABu));
}
inline float hash_to_unit(uint32_t h) { return static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f; }
inline float hash_uniform(uint64_t seed, uint64_t index) {
    return hash_to_unit(mix32(static_cast<uint32_t>(index) ^ hash_key(seed, index)));
}
// dst[i] (+)= hash_uniform(seed, index + i) for i < n; the fast path when the 32-bit halves allow.
void hash_fill(float* dst, size_t n, uint64_t seed, uint64_t index, bool accumulate = false);

// ------------------------------------------------------------------ dtypes
size_t dtype_size(mh_dtype dtype);  // bytes per element (int8: 1; its row scales are apart)
const char* dtype_name(mh_dtype dtype);
uint16_t f32_to_f16(float f);  // round to nearest even
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even
float bf16_to_f32(uint16_t h);
// Symmetric int8 as the library's KV cache quantises a (token, head) row of n values:
// scale = max|x| / 127, q[i] = x[i] / scale rounded to nearest even and clamped to [-127, 127];
// an all-zero row gets scale 0 (and q = 0). Returns the scale; x[i] reads back as scale * q[i].
float quantize_i8_row(const float* x, int8_t* q, size_t n);
// dst[i] = src[i] stored as dtype (a copy for f32, rounded for f16/bf16). MH_DTYPE_I8: the n
// values are ONE row, quantised by quantize_i8_row, its scale written to *scale.
void store_as(mh_dtype dtype, const float* src, void* dst, size_t n, float* scale = nullptr);
// dst[i] = src[i] for n elements of the given dtype converted to float, exactly (MH_DTYPE_I8:
// one row, dequantised as scale * q).
void load_as_float(mh_dtype dtype, const void* src, float* dst, size_t n, float scale = 0.0f);
// Row (b, tok, h) of a tensor view of this dtype: its n stored values, exactly, as double
// (int8: scale * q from the row's scale in the view, the product in double).
void load_row(const mh_tensor& t, mh_dtype dtype, int b, int tok, int h, double* dst, size_t n);

// A view of a float/f16/bf16 tensor (no int8 scales).
inline mh_tensor tensor_view(const void* data, ptrdiff_t stride_batch, ptrdiff_t stride_token, ptrdiff_t stride_head) {
    mh_tensor t{};
    t.data = data;
    t.stride_batch = stride_batch, t.stride_token = stride_token, t.stride_head = stride_head;
    return t;
}

// ------------------------------------------------------------------ library handles
struct ContextDeleter {
    void operator()(mh_context* p) const { mh_context_destroy(p); }
};
struct LayerDeleter {
    void operator()(mh_layer* p) const { mh_layer_destroy(p); }
};
struct CacheDeleter {
    void operator()(mh_kv_cache* p) const { mh_kv_cache_destroy(p); }
};
using ContextPtr = std::unique_ptr<mh_context, ContextDeleter>;
using LayerPtr = std::unique_ptr<mh_layer, LayerDeleter>;
using CachePtr = std::unique_ptr<mh_kv_cache, CacheDeleter>;

// ------------------------------------------------------------------ accuracy
struct ErrorStats {
    double max_abs = 0.0;  // max |got - ref|
    double rel_l2 = 0.0;   // ||got - ref||_2 / ||ref||_2
    size_t count = 0;      // elements compared
};

class ErrorAccumulator {
public:
    void add(double got, double ref);
    ErrorStats result() const;

private:
    double max_abs_ = 0.0, diff2_ = 0.0, ref2_ = 0.0;
    size_t count_ = 0;
    bool nonfinite_ = false;
};

// ------------------------------------------------------------------ memory use
// Resident set size now, and the peak since the last reset_peak_rss(), in bytes (Linux
// /proc/self/status VmRSS / VmHWM). reset_peak_rss() writes "5" to /proc/self/clear_refs, which
// resets VmHWM to the current RSS; it returns false when that is not possible (then VmHWM is the
// process-wide peak, as getrusage's ru_maxrss).
size_t current_rss_bytes();
size_t peak_rss_bytes();
bool reset_peak_rss();

// ------------------------------------------------------------------ small things
double seconds_since(const std::chrono::steady_clock::time_point& t0);
std::string format_bytes(double bytes);  // "12.0 MiB"

}  // namespace mhb

#endif
