#include "bench_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>

namespace mhb {

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
    // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    ptr_.reset(p);
}

uint64_t Rng::next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float Rng::uniform(float scale) {
    // 24 random bits -> [0, 1) exactly representable, then [-1, 1).
    const float u = static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
    return (2.0f * u - 1.0f) * scale;
}

void Rng::fill(float* p, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) p[i] = uniform(scale);
}

size_t dtype_size(mh_dtype dtype) { return dtype == MH_DTYPE_F32 ? 4 : 2; }

const char* dtype_name(mh_dtype dtype) {
    switch (dtype) {
    case MH_DTYPE_F32: return "f32";
    case MH_DTYPE_F16: return "f16";
    case MH_DTYPE_BF16: return "bf16";
    }
    return "unknown";
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (a < 0x38800000u) {  // below 2^-14: a half subnormal (or zero); exact in float * 2^24
        float af;
        std::memcpy(&af, &a, 4);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(af * 16777216.0f)));
    }
    a += 0xfffu + ((a >> 13) & 1u);  // round to nearest even on the 13 dropped bits
    a -= (127u - 15u) << 23;
    return static_cast<uint16_t>(sign | (a >> 13));
}

float f16_to_f32(uint16_t h) {
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float v;
    if (e == 0)
        v = std::ldexp(static_cast<float>(m), -24);
    else if (e == 31)
        v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(static_cast<float>(m | 0x400u), static_cast<int>(e) - 25);
    return (h & 0x8000u) ? -v : v;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t h) {
    const uint32_t x = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

void store_as(mh_dtype dtype, const float* src, void* dst, size_t n) {
    switch (dtype) {
    case MH_DTYPE_F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case MH_DTYPE_F16:
        for (size_t i = 0; i < n; i++) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
        return;
    case MH_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
        return;
    }
}

double load_as_double(const void* base, mh_dtype dtype, ptrdiff_t index) {
    switch (dtype) {
    case MH_DTYPE_F32: return static_cast<const float*>(base)[index];
    case MH_DTYPE_F16: return f16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case MH_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    }
    return 0.0;
}

void ErrorAccumulator::add(double got, double ref) {
    const double d = got - ref;
    if (!std::isfinite(got)) nonfinite_ = true;
    max_abs_ = std::fmax(max_abs_, std::fabs(d));
    diff2_ += d * d;
    ref2_ += ref * ref;
    count_++;
}

ErrorStats ErrorAccumulator::result() const {
    ErrorStats s;
    s.count = count_;
    if (nonfinite_) {
        s.max_abs = s.rel_l2 = std::numeric_limits<double>::infinity();
        return s;
    }
    s.max_abs = max_abs_;
    s.rel_l2 = ref2_ > 0 ? std::sqrt(diff2_ / ref2_) : std::sqrt(diff2_);
    return s;
}

}  // namespace mhb
