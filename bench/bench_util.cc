#include "bench_util.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <vector>
#include <sys/mman.h>
#include <algorithm>

namespace mhb {

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
    // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
    // Large buffers (K/V, activations) are 2 MiB aligned and offered to transparent huge pages,
    // as the library does for its own caches (src/util/alloc.c): an engine's KV cache would be.
    const size_t align = bytes >= (size_t{2} << 20) ? (size_t{2} << 20) : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align > 64) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
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

size_t dtype_size(mh_dtype dtype) {
    switch (dtype) {
    case MH_DTYPE_F32: return 4;
    case MH_DTYPE_F16:
    case MH_DTYPE_BF16: return 2;
    case MH_DTYPE_I8: return 1;
    }
    return 0;
}

const char* dtype_name(mh_dtype dtype) {
    switch (dtype) {
    case MH_DTYPE_F32: return "f32";
    case MH_DTYPE_F16: return "f16";
    case MH_DTYPE_BF16: return "bf16";
    case MH_DTYPE_I8: return "i8";
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

void hash_fill(float* dst, size_t n, uint64_t seed, uint64_t index, bool accumulate) {
    size_t i = 0;
    while (i < n) {
        // a run that stays within one value of index >> 32 shares its key
        const uint64_t at = index + i;
        const uint64_t room = (uint64_t{1} << 32) - (at & 0xffffffffu);
        const size_t len = static_cast<size_t>(std::min<uint64_t>(room, n - i));
        const uint32_t key = hash_key(seed, at), lo = static_cast<uint32_t>(at);
        float* d = dst + i;
        if (accumulate)
            for (uint32_t k = 0; k < len; k++) d[k] += hash_to_unit(mix32((lo + k) ^ key));
        else
            for (uint32_t k = 0; k < len; k++) d[k] = hash_to_unit(mix32((lo + k) ^ key));
        i += len;
    }
}

namespace {
float f16_to_f32_slow(uint16_t h) {
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
}  // namespace

float f16_to_f32(uint16_t h) {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; i++) t[i] = f16_to_f32_slow(static_cast<uint16_t>(i));
        return t;
    }();
    return table[h];
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MHB_F16C 1
#include <immintrin.h>
// F16C's vcvtps2ph with round-to-nearest-even: the same bits as f32_to_f16, 8 at a time.
__attribute__((target("avx,f16c"))) static void store_f16_f16c(const float* src, uint16_t* dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}
static bool have_f16c() {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;  // every AVX2 CPU has F16C (clang cannot test f16c)
    }();
    return yes;
}
#endif

float quantize_i8_row(const float* x, int8_t* q, size_t n) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) amax = std::max(amax, std::fabs(x[i]));
    const float scale = amax / 127.0f;
    if (scale == 0.0f) {
        std::memset(q, 0, n);
        return 0.0f;
    }
    // |x / scale| <= 127: adding and subtracting 1.5 * 2^23 rounds it to an integer, to nearest
    // even in the default rounding mode, in a loop the compiler vectorises (std::nearbyint is a
    // library call per element without SSE4.1)
    constexpr float kRound = 12582912.0f;
    for (size_t i = 0; i < n; i++) {
        const float r = (x[i] / scale + kRound) - kRound;
        q[i] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, r)));
    }
    return scale;
}

void store_as(mh_dtype dtype, const float* src, void* dst, size_t n, float* scale) {
    switch (dtype) {
    case MH_DTYPE_F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case MH_DTYPE_F16:
#if defined(MHB_F16C)
        if (have_f16c()) {
            store_f16_f16c(src, static_cast<uint16_t*>(dst), n);
            return;
        }
#endif
        for (size_t i = 0; i < n; i++) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
        return;
    case MH_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
        return;
    case MH_DTYPE_I8: *scale = quantize_i8_row(src, static_cast<int8_t*>(dst), n); return;
    }
}

void load_as_float(mh_dtype dtype, const void* src, float* dst, size_t n, float scale) {
    switch (dtype) {
    case MH_DTYPE_F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case MH_DTYPE_F16:
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
        return;
    case MH_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
        return;
    case MH_DTYPE_I8:
        for (size_t i = 0; i < n; i++) dst[i] = scale * static_cast<float>(static_cast<const int8_t*>(src)[i]);
        return;
    }
}

void load_row(const mh_tensor& t, mh_dtype dtype, int b, int tok, int h, double* dst, size_t n) {
    const ptrdiff_t at = b * t.stride_batch + tok * t.stride_token + h * t.stride_head;
    const char* src = static_cast<const char*>(t.data) + at * static_cast<ptrdiff_t>(dtype_size(dtype));
    if (dtype == MH_DTYPE_I8) {
        const double scale = t.scale[b * t.scale_stride_batch + tok * t.scale_stride_token + h * t.scale_stride_head];
        for (size_t i = 0; i < n; i++) dst[i] = scale * reinterpret_cast<const int8_t*>(src)[i];
        return;
    }
    float chunk[64];
    for (size_t i = 0; i < n; i += 64) {
        const size_t len = std::min<size_t>(64, n - i);
        load_as_float(dtype, src + i * dtype_size(dtype), chunk, len);
        std::copy_n(chunk, len, dst + i);
    }
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

namespace {
size_t status_kib(const char* key) {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t v = 0;
    const size_t klen = std::strlen(key);
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, key, klen) == 0) v = std::strtoull(line + klen, nullptr, 10);
    std::fclose(f);
    return v;
}
}  // namespace

size_t current_rss_bytes() { return status_kib("VmRSS:") * 1024; }

size_t peak_rss_bytes() {
    const size_t hwm = status_kib("VmHWM:") * 1024;
    if (hwm) return hwm;
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? static_cast<size_t>(ru.ru_maxrss) * 1024 : 0;
}

bool reset_peak_rss() {
    FILE* f = std::fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool ok = std::fputs("5", f) >= 0;
    return std::fclose(f) == 0 && ok;
}

double seconds_since(const std::chrono::steady_clock::time_point& t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string format_bytes(double bytes) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) bytes /= 1024.0, u++;
    char b[64];
    std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return b;
}

}  // namespace mhb
