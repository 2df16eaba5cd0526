// Small helpers shared by the benchmark sources: aligned buffers, a deterministic RNG,
// f16/bf16 storage conversions, RAII handles for the library objects, error statistics.
#ifndef MH_BENCH_UTIL_H
#define MH_BENCH_UTIL_H

#include <cstddef>
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

// ------------------------------------------------------------------ dtypes
size_t dtype_size(mh_dtype dtype);
const char* dtype_name(mh_dtype dtype);
uint16_t f32_to_f16(float f);  // round to nearest even
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even
float bf16_to_f32(uint16_t h);
// dst[i] = src[i] stored as dtype (a copy for f32, rounded for f16/bf16).
void store_as(mh_dtype dtype, const float* src, void* dst, size_t n);
// The stored element back, exactly, as double.
double load_as_double(const void* base, mh_dtype dtype, ptrdiff_t index);

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

}  // namespace mhb

#endif
