// Peak multiply-add throughput and streaming read bandwidth of this machine, measured at start.
//
// Peak ("peak_gflops/<isa>/threads:T"): each probe is ONE inline-assembly loop on named vector
// registers, so no compiler, optimisation level or register allocator can spill an accumulator
// to the stack or fold the work away (an earlier C version relied on the optimiser keeping 12-16
// locals in registers: at -O0 they all live in memory and the "peak" drops several-fold).
//  - avx512: 24 independent chains  zmm_k = zmm_k * a + a  (vfmadd132ps, zmm0-23; a in zmm31).
//    FMA latency is 4 cycles and two ports issue one each per cycle: 8 chains keep them busy,
//    24 is 3x that.
//  - avx512+bf16 (the bf16 compute mode's peak, "peak_gflops/avx512+bf16/threads:T"): the same
//    24 chains of vdpbf16ps zmm_k += pairs of zmm31 x zmm31 (16 lanes x a pair: 2 x 32 FLOPs
//    per instruction), where the CPU has AVX512-BF16 (mh_compute_supported).
//  - avx2:   15 chains on ymm0-14 (a in ymm15), the most 16 registers allow (>= 2 x 8).
//  - scalar: the library's scalar kernels are compiled for the baseline x86-64 target (SSE2,
//    no FMA), where the compiler auto-vectorises at 4 floats with separate mulps and addps. The
//    probe issues exactly that: 12 chains acc_k += a * b (mulps into a temporary, then addps),
//    2 FLOPs per lane. A kernel that does not vectorise at all reaches a quarter of it.
//  - AArch64 (neon, and scalar there): 24 chains  v_k += a * b  (fmla .4s, v0-23).
//    SVE gets no probe of its own yet (its pct_peak is then 0, see MachineLimits::peak).
// The chains converge to a finite fixed point (a < 1) or grow linearly (by a*b = 1e-7 per
// round): no overflow, no denormals, every round costs the same. Each thread count takes the
// best of several timed runs: anything else running on the machine only ever lowers a result.
//
// Bandwidth ("read_gbps/threads:T"): a streaming read (sum of every float, several independent
// accumulators, the widest vector loads this CPU has) of a buffer of max(1 GiB, 4 x the
// last-level cache the system reports) bytes, far beyond the LLC, allocated exactly like the
// library's KV cache (aligned_alloc(64) then zero fill: src/util/alloc.c) and first touched by
// the threads that read it. Each thread reads its own contiguous slice, as 1, 2 or 4 contiguous parts in turns
// of 256 bytes each ("read_streams/threads:T": the count that read fastest). One stream leaves
// a core's memory parallelism unused on some CPUs (Zen 5: about 30 GB/s from one stream, 36
// from two, 40 from four), and the decode kernels read K and V together: a one-stream probe
// put MHA decode at 100-118% of "the" bandwidth. Bytes / wall time of the slowest thread,
// in 1e9 bytes per second; the best of a few passes of each part count. One thread: over its
// CPU time (the rate while it runs, as for the peak); several: over wall time, since bandwidth
// is shared and the threads must really run together (an all-thread figure below the
// one-thread one, which means they did not, is raised to it).
#include "machine_limits.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <benchmark/benchmark.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench_util.h"

namespace mhb {
namespace {

MachineLimits g_limits;

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs body(t) for t < threads on `threads` std::threads released together; returns the wall
// seconds from the release to the last one finishing, and each thread's own CPU seconds.
double run_parallel(int threads, const std::function<void(int)>& body, std::vector<double>* cpu = nullptr) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    std::vector<double> cpu_s(static_cast<size_t>(threads));
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            const double c0 = thread_cpu_seconds();
            body(t);
            cpu_s[static_cast<size_t>(t)] = thread_cpu_seconds() - c0;
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    if (cpu) *cpu = cpu_s;
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ------------------------------------------------------------------ multiply-add probes
// Every probe: probe(rounds, ab, out) runs `rounds` rounds of its chains (rounds >= 1), with
// ab[0] = a and ab[1] = b, and stores one accumulator vector to out (64 bytes) so the work is
// observable. Returns FLOPs per round (2 per lane per chain).
struct FmaProbe {
    mh_isa isa;
    const char* what;
    double (*fn)(long rounds, const float* ab, float* out);
    mh_compute compute = MH_COMPUTE_F32;  // the compute mode whose peak it measures
};

#define MHB_STR2(x) #x
#define MHB_STR(x) MHB_STR2(x)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MHB_X86_PROBES 1

#define MHB_FMA512(k) "vfmadd132ps %%zmm31, %%zmm31, %%zmm" MHB_STR(k) "\n\t"
#define MHB_INIT512(k) "vmovaps %%zmm30, %%zmm" MHB_STR(k) "\n\t"
#define MHB_X24(X)                                                                          \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
        X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

// An AVX-512 probe: 24 chains of `OP zmm31, zmm31, zmm_k` (accumulators from zmm30), FLOPS per round.
#define MHB_PROBE512(name, OP, FLOPS)                                                                 \
    __attribute__((target("avx512f"))) double name(long rounds, const float* ab, float* out) {        \
        __asm__ volatile("vbroadcastss (%[ab]), %%zmm31\n\t"                                          \
                         "vbroadcastss 4(%[ab]), %%zmm30\n\t" MHB_X24(MHB_INIT512) "1:\n\t" MHB_X24(OP) \
                         "dec %[n]\n\t"                                                               \
                         "jnz 1b\n\t"                                                                 \
                         "vmovups %%zmm0, (%[out])\n\t"                                               \
                         "vzeroupper\n\t"                                                             \
                         : [n] "+r"(rounds)                                                           \
                         : [ab] "r"(ab), [out] "r"(out)                                               \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",    \
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",     \
                           "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm30",    \
                           "xmm31", "memory", "cc");                                                  \
        return FLOPS;                                                                                 \
    }

MHB_PROBE512(probe_avx512, MHB_FMA512, 2.0 * 16 * 24)

// zmm31's 32-bit lanes hold the bf16 pairs the chains add the dot products of (a = ab[0] as
// two bf16 halves): the chains grow linearly (|a0 a0 + a1 a1| < 2 per round), never to
// infinity in a probe's rounds.
#define MHB_DPBF16(k) "vdpbf16ps %%zmm31, %%zmm31, %%zmm" MHB_STR(k) "\n\t"
MHB_PROBE512(probe_avx512_bf16, MHB_DPBF16, 2.0 * 32 * 24)

// AMX-BF16 (the bf16 compute mode's peak where its GEMMs run on AMX tiles: mh_compute_kernels
// says "amx", and the library has then been granted the tile state): 6 chains of tdpbf16ps
// into tiles 0-5 from tiles 6 (A) and 7 (B), all 16 rows x 64 bytes, a and b's bf16 halves
// filling A and B (16 x 16 x 32 multiply-adds per instruction). The tile numbers are the
// instructions' immediates, so intrinsics pin them as the assembly does the zmm registers.
struct alignas(64) AmxConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
#define MHB_AMX_DP(k) _tile_dpbf16ps(k, 6, 7);
__attribute__((target("amx-tile,amx-bf16"))) double probe_amx_bf16(long rounds, const float* ab, float* out) {
    static const AmxConfig cfg;
    uint32_t bits[2];
    std::memcpy(bits, ab, sizeof bits);
    alignas(64) uint16_t ops[2][16 * 32];
    for (int i = 0; i < 16 * 32; i++)
        ops[0][i] = static_cast<uint16_t>(bits[0] >> 16), ops[1][i] = static_cast<uint16_t>(bits[1] >> 16);
    _tile_loadconfig(&cfg);
    _tile_loadd(6, ops[0], 64);
    _tile_loadd(7, ops[1], 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    for (long r = 0; r < rounds; r++) {
        MHB_AMX_DP(0) MHB_AMX_DP(1) MHB_AMX_DP(2) MHB_AMX_DP(3) MHB_AMX_DP(4) MHB_AMX_DP(5)
    }
    alignas(64) float c[16 * 16];
    _tile_stored(0, c, 64);
    _tile_release();
    std::memcpy(out, c, 64);
    return 2.0 * 16 * 16 * 32 * 6;
}

#define MHB_FMA256(k) "vfmadd132ps %%ymm15, %%ymm15, %%ymm" MHB_STR(k) "\n\t"
#define MHB_INIT256(k) "vmovaps %%ymm14, %%ymm" MHB_STR(k) "\n\t"
#define MHB_X14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

__attribute__((target("avx2,fma"))) double probe_avx2(long rounds, const float* ab, float* out) {
    // 15 chains: ymm0-13 plus ymm14, which seeds the others and is then a chain itself.
    __asm__ volatile(
        "vbroadcastss (%[ab]), %%ymm15\n\t"
        "vbroadcastss 4(%[ab]), %%ymm14\n\t" MHB_X14(MHB_INIT256)
        "1:\n\t" MHB_X14(MHB_FMA256)
        "vfmadd132ps %%ymm15, %%ymm15, %%ymm14\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovups %%ymm0, (%[out])\n\t"
        "vzeroupper\n\t"
        : [n] "+r"(rounds)
        : [ab] "r"(ab), [out] "r"(out)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
    return 2.0 * 8 * 15;
}

// SSE2: acc_k += a * b as movaps a->t; mulps b,t; addps t,acc_k (12 accumulators xmm0-11,
// a in xmm14, b in xmm15, temporaries xmm12/xmm13). The product is off the dependency chain,
// as in a vectorised dot product.
#define MHB_SSE(k, t)                          \
    "movaps %%xmm14, %%xmm" MHB_STR(t) "\n\t"  \
    "mulps %%xmm15, %%xmm" MHB_STR(t) "\n\t"   \
    "addps %%xmm" MHB_STR(t) ", %%xmm" MHB_STR(k) "\n\t"
#define MHB_SSEINIT(k) "xorps %%xmm" MHB_STR(k) ", %%xmm" MHB_STR(k) "\n\t"

double probe_sse(long rounds, const float* ab, float* out) {
    __asm__ volatile(
        "movss (%[ab]), %%xmm14\n\t"
        "shufps $0, %%xmm14, %%xmm14\n\t"
        "movss 4(%[ab]), %%xmm15\n\t"
        "shufps $0, %%xmm15, %%xmm15\n\t" MHB_SSEINIT(0) MHB_SSEINIT(1) MHB_SSEINIT(2) MHB_SSEINIT(3)
            MHB_SSEINIT(4) MHB_SSEINIT(5) MHB_SSEINIT(6) MHB_SSEINIT(7) MHB_SSEINIT(8) MHB_SSEINIT(9)
                MHB_SSEINIT(10) MHB_SSEINIT(11)
        "1:\n\t" MHB_SSE(0, 12) MHB_SSE(1, 13) MHB_SSE(2, 12) MHB_SSE(3, 13) MHB_SSE(4, 12)
            MHB_SSE(5, 13) MHB_SSE(6, 12) MHB_SSE(7, 13) MHB_SSE(8, 12) MHB_SSE(9, 13)
                MHB_SSE(10, 12) MHB_SSE(11, 13)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "movups %%xmm0, (%[out])\n\t"
        : [n] "+r"(rounds)
        : [ab] "r"(ab), [out] "r"(out)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
    return 2.0 * 4 * 12;
}
#endif

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define MHB_ARM_PROBES 1
#define MHB_FMLA(k) "fmla v" MHB_STR(k) ".4s, v30.4s, v31.4s\n\t"
#define MHB_ZERO(k) "movi v" MHB_STR(k) ".16b, #0\n\t"
#define MHB_A24(X)                                                                          \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
        X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
double probe_neon(long rounds, const float* ab, float* out) {
    __asm__ volatile(
        "ld1r {v30.4s}, [%[ab]]\n\t"
        "add x9, %[ab], #4\n\t"
        "ld1r {v31.4s}, [x9]\n\t" MHB_A24(MHB_ZERO)
        "1:\n\t" MHB_A24(MHB_FMLA)
        "subs %[n], %[n], #1\n\t"
        "b.ne 1b\n\t"
        "st1 {v0.4s}, [%[out]]\n\t"
        : [n] "+r"(rounds)
        : [ab] "r"(ab), [out] "r"(out)
        : "x9", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
          "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v30",
          "v31", "memory", "cc");
    return 2.0 * 4 * 24;
}
#endif

// The probe of one ISA's compute mode, or {isa, nullptr, nullptr} where there is none for it
// on this machine (the scalar ISA's bf16 mode multiplies in f32: its f32 probe is its peak).
FmaProbe probe_of(mh_isa isa, mh_compute compute) {
    if (compute == MH_COMPUTE_BF16) {
#if defined(MHB_X86_PROBES)
        const char* kernels = mh_compute_kernels(isa, compute);
        if (isa == MH_ISA_AVX512 && kernels && std::strcmp(kernels, "amx") == 0)
            return {isa, "AMX-BF16 tdpbf16ps 16x16x32, 6 tile chains", probe_amx_bf16, compute};
        if (isa == MH_ISA_AVX512) return {isa, "AVX512-BF16 vdpbf16ps 16 lanes x 2, 24 chains", probe_avx512_bf16, compute};
#endif
        return {isa, nullptr, nullptr, compute};
    }
#if defined(MHB_X86_PROBES)
    if (isa == MH_ISA_SCALAR) return {isa, "SSE2 mulps+addps, 12 chains", probe_sse};
    if (isa == MH_ISA_AVX2) return {isa, "AVX2 vfmadd 8 lanes, 15 chains", probe_avx2};
    if (isa == MH_ISA_AVX512) return {isa, "AVX-512 vfmadd 16 lanes, 24 chains", probe_avx512};
#elif defined(MHB_ARM_PROBES)
    if (isa == MH_ISA_SCALAR || isa == MH_ISA_NEON) return {isa, "NEON fmla 4 lanes, 24 chains", probe_neon};
#endif
    return {isa, nullptr, nullptr};
}

// A probe for every ISA of the registry and compute mode that this machine runs
// (mh_compute_supported) and that has one.
std::vector<FmaProbe> available_probes() {
    std::vector<FmaProbe> out;
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++)
        for (mh_compute m : {MH_COMPUTE_F32, MH_COMPUTE_BF16}) {
            const FmaProbe p = probe_of(static_cast<mh_isa>(i), m);
            if (p.fn && mh_compute_supported(p.isa, m)) out.push_back(p);
        }
    return out;
}

volatile double g_sink = 0.0;
const float g_ab[2] = {0.9999999f, 1e-7f};

double measure_fma(const FmaProbe& p, int threads, bool quick) {
    alignas(64) float out[16];
    const double target_s = quick ? 0.02 : 0.06;
    // Calibrate the round count on one thread, then keep the best of several timed runs.
    long rounds = 1 << 12;
    double flops_per_round = 0;
    for (;;) {
        const auto t0 = Clock::now();
        flops_per_round = p.fn(rounds, g_ab, out);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        g_sink = g_sink + out[0];
        if (s > 0.005 || rounds > (1L << 40)) {
            rounds = std::max(1L, static_cast<long>(static_cast<double>(rounds) * target_s / s));
            break;
        }
        rounds *= 8;
    }
    // Each thread's rate is its FLOPs over its own CPU time, and the result their sum: the
    // multiply-add units' throughput while the probe runs on them, which other processes on a
    // shared machine cannot deflate by taking the core away (they only ever lower a wall-clock
    // figure). Valid for thread counts up to the number of cores, which is what is measured.
    double best = 0.0;
    const int reps = quick ? 3 : 5;
    for (int rep = 0; rep < reps; rep++) {
        std::vector<float> outs(static_cast<size_t>(threads) * 16);
        std::vector<double> cpu;
        run_parallel(threads, [&](int t) {
            alignas(64) float o[16];
            p.fn(rounds, g_ab, o);
            outs[static_cast<size_t>(t) * 16] = o[0];
        }, &cpu);
        double rate = 0;
        for (int t = 0; t < threads; t++) {
            g_sink = g_sink + outs[static_cast<size_t>(t) * 16];
            rate += flops_per_round * static_cast<double>(rounds) / std::max(cpu[static_cast<size_t>(t)], 1e-9);
        }
        best = std::max(best, rate * 1e-9);
    }
    return best;
}

// ------------------------------------------------------------------ read bandwidth
// Sum of the n floats at p (n a multiple of 64 * streams), read as `streams` contiguous parts
// in turns, 256 bytes of each per turn, with vectors of V (4 accumulators).
template <typename V>
inline __attribute__((always_inline)) double sum_streams(const float* p, size_t n, int streams) {
    constexpr size_t lanes = sizeof(V) / sizeof(float), turn = 64;  // floats per part per turn
    V acc[4] = {};
    const size_t part = n / static_cast<size_t>(streams);
    for (size_t i = 0; i < part; i += turn)
        for (int s = 0; s < streams; s++) {
            const float* q = p + static_cast<size_t>(s) * part + i;
            for (size_t k = 0; k < turn / lanes; k++) {
                V x;
                std::memcpy(&x, q + k * lanes, sizeof x);
                acc[k % 4] += x;
            }
        }
    const V sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    double r = 0;
    for (size_t l = 0; l < lanes; l++) r += sum[l];
    return r;
}

typedef float v4f __attribute__((vector_size(16)));
double sum_baseline(const float* p, size_t n, int streams) { return sum_streams<v4f>(p, n, streams); }

#if defined(MHB_X86_PROBES)
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) double sum_avx512(const float* p, size_t n, int streams) {
    return sum_streams<v16f>(p, n, streams);
}
__attribute__((target("avx2"))) double sum_avx2(const float* p, size_t n, int streams) {
    return sum_streams<v8f>(p, n, streams);
}
#endif

using SumFn = double (*)(const float*, size_t, int);

SumFn best_sum(const char** name) {
#if defined(MHB_X86_PROBES)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return *name = "avx512 loads", sum_avx512;
    if (__builtin_cpu_supports("avx2")) return *name = "avx2 loads", sum_avx2;
#endif
    return *name = "16-byte loads", sum_baseline;
}

// The last-level cache as sysfs reports it for this CPU; 0 if sysfs has no cache levels.
long sysfs_llc_bytes() {
    for (int idx = 4; idx >= 0; idx--) {
        const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
        std::ifstream lv(base + "level"), sz(base + "size");
        int level = 0;
        std::string size;
        if (!(lv >> level) || !(sz >> size) || level < 2) continue;
        long v = std::atol(size.c_str());
        if (!size.empty() && (size.back() == 'K' || size.back() == 'k')) v <<= 10;
        if (!size.empty() && size.back() == 'M') v <<= 20;
        if (v > 0) return v;
    }
    return 0;
}

// The C library's L3 size; 0 if unknown.
long libc_llc_bytes() {
#if defined(_SC_LEVEL3_CACHE_SIZE)
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return l3;
#endif
    return 0;
}

// Bytes per second of one-stream reads of data[0, bytes / 4): the best of `passes` passes
// after one that brings what fits into the caches.
double read_rate(const SumFn sum, const float* data, size_t bytes, int passes) {
    const size_t n = bytes / sizeof(float) / 64 * 64;
    g_sink = g_sink + sum(data, n, 1);
    double best = 1e30;
    for (int pass = 0; pass < passes; pass++) {
        const auto t0 = Clock::now();
        g_sink = g_sink + sum(data, n, 1);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return static_cast<double>(n * sizeof(float)) / std::max(best, 1e-9);
}

// The C library's L3 size comes from CPUID, which a virtual machine may fill with the whole
// socket's L3 (an AMD EPYC Zen 5 VM: 508 MiB, where a core reaches its CCD's 32 MiB, shared
// with the other tenants' cores). Checked by reading: `reported` stands if half of it still
// reads at least twice as fast as memory; else the LLC is taken as twice the largest
// power-of-two buffer (from 1 MiB) that does, 0 if none (that VM: 8 MiB read at 3.5x memory,
// 16 MiB at 2.3x, 32 MiB at 1.6x, 64 MiB at memory speed; 16 or 32 MiB in most runs, 8 MiB
// in a contended one, as the neighbours leave the L3). Memory's rate is the best of a read of
// the whole buffer before and after each test: a neighbour's burst only lowers a rate, and a
// memory rate lowered by one would pass a buffer that is not cached (one run took 256 MiB for
// the LLC that way).
long checked_llc_bytes(long reported, const SumFn sum, const float* data, size_t data_bytes) {
    const size_t half = static_cast<size_t>(reported) / 2;
    if (half < (size_t{1} << 20)) return reported;
    double memory = read_rate(sum, data, data_bytes, 1);
    auto cached = [&](size_t bytes) {
        const double rate = read_rate(sum, data, bytes, 3);
        memory = std::max(memory, read_rate(sum, data, data_bytes, 1));
        return rate >= 2.0 * memory;
    };
    if (cached(half)) return reported;
    size_t s = size_t{1} << (63 - __builtin_clzll(half)); /* the largest power of two <= half */
    for (s = s == half ? s / 2 : s; s >= (size_t{1} << 20); s /= 2)
        if (cached(s)) return static_cast<long>(2 * s);
    return 0;
}

// The most parts each thread's slice is read in at once (1, 2, 4 are tried).
constexpr int kMaxStreams = 4;

void measure_bandwidth(const std::vector<int>& thread_counts, bool quick) {
    const long sysfs_llc = sysfs_llc_bytes(), reported = sysfs_llc ? sysfs_llc : libc_llc_bytes();
    size_t bytes = quick ? size_t{512} << 20 : size_t{1} << 30;
    if (static_cast<size_t>(reported) * 4 > bytes) bytes = static_cast<size_t>(reported) * 4;
    bytes = (bytes + 4095) / 4096 * 4096;
    g_limits.bw_buffer_bytes = bytes;
    const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
    // Like mh_alloc: aligned_alloc(64, ...) then zero fill; the fill is split over the threads
    // so every page is first touched by a thread that will read it.
    AlignedBuffer buf(bytes);
    float* data = buf.as<float>();
    const size_t n = bytes / sizeof(float);
    auto slice = [n](int t, int threads, size_t* lo, size_t* hi) {
        const size_t per = n / static_cast<size_t>(threads) / (64 * kMaxStreams) * (64 * kMaxStreams);
        *lo = per * static_cast<size_t>(t);
        *hi = *lo + per;
    };
    run_parallel(max_threads, [&](int t) {
        size_t lo, hi;
        slice(t, max_threads, &lo, &hi);
        if (t == max_threads - 1) hi = n;
        std::memset(data + lo, 0, (hi - lo) * sizeof(float));
    });
    const char* how = "";
    const SumFn sum = best_sum(&how);
    g_limits.bw_method = how;
    const long llc = sysfs_llc ? sysfs_llc : checked_llc_bytes(reported, sum, data, bytes);
    g_limits.llc_bytes = llc;
    g_limits.llc_source = sysfs_llc ? "sysfs" : llc == reported ? "C library" : "measured";
    if (!sysfs_llc && reported && llc != reported)
        std::fprintf(stderr, "machine: the C library's LLC of %ld MiB does not read as a cache here: %ld MiB measured\n",
                     reported >> 20, llc >> 20);
    const int passes = quick ? 2 : 4;
    for (int threads : thread_counts) {
        double best = 0.0;
        int best_streams = 1;
        size_t lo, hi;
        slice(0, threads, &lo, &hi);
        const double total = static_cast<double>(hi - lo) * sizeof(float) * threads;
        for (int rep = 0; rep < passes; rep++)
            for (int streams = 1; streams <= kMaxStreams; streams *= 2) {
                std::vector<double> sinks(static_cast<size_t>(threads)), cpu;
                const double s = run_parallel(threads, [&](int t) {
                    size_t l, h;
                    slice(t, threads, &l, &h);
                    sinks[static_cast<size_t>(t)] = sum(data + l, h - l, streams);
                }, &cpu);
                for (double v : sinks) g_sink = g_sink + v;
                // one thread: its own CPU time (the rate while it runs); several: wall time
                const double secs = threads == 1 ? std::max(cpu[0], 1e-9) : s;
                if (total / secs * 1e-9 > best) best = total / secs * 1e-9, best_streams = streams;
            }
        // More threads never have less bandwidth than one: on a shared machine a low all-thread
        // figure means the threads did not all get a core.
        if (threads > 1) best = std::max(best, g_limits.bandwidth(1));
        g_limits.read_gbps[threads] = best;
        g_limits.read_streams[threads] = best_streams;
        std::fprintf(stderr,
                     "machine: read bandwidth, %d thread(s): %.1f GB/s (%zu MiB buffer, LLC %ld MiB, %s, "
                     "best with %d stream(s) per thread)\n",
                     threads, best, bytes >> 20, llc >> 20, how, best_streams);
    }
}

std::string fmt(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

}  // namespace

std::string kernel_label(mh_isa isa, mh_compute compute) {
    std::string s = mh_isa_name(isa);
    if (compute != MH_COMPUTE_F32) s += std::string("+") + mh_compute_name(compute);
    return s;
}

double MachineLimits::peak(mh_isa isa, int threads, mh_compute compute) const {
    if (isa == MH_ISA_SCALAR) compute = MH_COMPUTE_F32; /* its bf16 kernels multiply in f32 */
    auto it = peak_gflops.find({kernel_label(isa, compute), threads});
    const double own = it == peak_gflops.end() ? 0.0 : it->second;
    /* bf16 products are exact in f32, so the mode's ceiling is the faster of its dot-product
     * instruction and the ISA's FMAs (the library's AVX-512 bf16 GEMMs widen to FMAs where
     * VDPBF16PS is the slower: docs/kernels.md, "bf16 on FMAs") */
    return compute == MH_COMPUTE_F32 ? own : std::max(own, peak(isa, threads, MH_COMPUTE_F32));
}

double MachineLimits::bandwidth(int threads) const {
    auto it = read_gbps.find(threads);
    return it == read_gbps.end() ? 0.0 : it->second;
}

void measure_machine_limits(const std::vector<int>& thread_counts, bool quick) {
    if (thread_counts.empty()) return;
    for (const FmaProbe& p : available_probes()) {
        for (int threads : thread_counts) {
            const double g = measure_fma(p, threads, quick);
            const std::string label = kernel_label(p.isa, p.compute);
            g_limits.peak_gflops[{label, threads}] = g;
            g_limits.peak_method[label] = p.what;
            std::fprintf(stderr, "machine: peak multiply-add, %s (%s), %d thread(s): %.1f GFLOP/s\n",
                         label.c_str(), p.what, threads, g);
        }
    }
    measure_bandwidth(thread_counts, quick);
}

void add_machine_limits_context() {
    for (const auto& kv : g_limits.peak_gflops) {
        benchmark::AddCustomContext("peak_gflops/" + kv.first.first + "/threads:" + std::to_string(kv.first.second),
                                    fmt(kv.second));
    }
    for (const auto& kv : g_limits.peak_method)
        benchmark::AddCustomContext("peak_probe/" + kv.first, kv.second);
    for (const auto& kv : g_limits.read_gbps)
        benchmark::AddCustomContext("read_gbps/threads:" + std::to_string(kv.first), fmt(kv.second));
    for (const auto& kv : g_limits.read_streams)
        benchmark::AddCustomContext("read_streams/threads:" + std::to_string(kv.first), std::to_string(kv.second));
    if (g_limits.bw_buffer_bytes) {
        benchmark::AddCustomContext("read_buffer_bytes", std::to_string(g_limits.bw_buffer_bytes));
        benchmark::AddCustomContext("read_probe", g_limits.bw_method);
    }
    if (g_limits.llc_bytes) {
        benchmark::AddCustomContext("llc_bytes", std::to_string(g_limits.llc_bytes));
        benchmark::AddCustomContext("llc_source", g_limits.llc_source);
    }
}

const MachineLimits& machine_limits() { return g_limits; }

}  // namespace mhb
