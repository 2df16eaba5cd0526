// Peak multiply-add throughput and streaming read bandwidth, measured with plain C++ loops.
//
// What "peak" means here: the throughput of independent a*b+c chains (12 to 16 accumulators,
// enough to hide the latency) on the widest vectors a given kernel ISA uses, counting 2 FLOPs
// per lane (one multiply, one add, fused or not).
//  - "scalar": the loop is compiled with the default flags, exactly like the library's scalar
//    kernel table, whose loops are written to be auto-vectorised at the baseline width. So the
//    probe uses 16-byte GNU vectors: on x86-64 that is SSE2 mulps + addps (no FMA in the
//    baseline), on AArch64 NEON fmla. A kernel that does not vectorise at all can reach about
//    a quarter of it.
//  - "avx2" / "avx512": 32- / 64-byte vectors in functions compiled for that target (vfmadd),
//    probed only when this CPU and OS can run them. They are the ceilings for future SIMD
//    kernel tables; "neon" reuses the baseline probe on AArch64.
// It is a practical ceiling (the same multiply-add mix the attention and GEMM inner loops
// issue), not a datasheet number: turbo, SMT and the VM all show through.
//
// Bandwidth: a streaming sum over a buffer much larger than the last-level cache (512 MiB, or
// 2x the LLC if that is larger), each thread reading its own contiguous slice, best of a few
// passes. Bytes read / wall time, in 1e9 bytes per second.
#include "machine_limits.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include <benchmark/benchmark.h>

#include "bench_util.h"

namespace mhb {
namespace {

MachineLimits g_limits;

using Clock = std::chrono::steady_clock;

// Runs body(t) for t < threads on `threads` std::threads released together; returns the wall
// seconds from the release to the last one finishing.
double run_parallel(int threads, const std::function<void(int)>& body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            body(t);
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ------------------------------------------------------------------ multiply-add probes
// Each probe runs `iters` rounds of 12 (AVX-512: 16) independent acc = acc * a + b chains on VBYTES-wide
// float vectors and returns a sum of the accumulators (so nothing is optimised away). a < 1
// keeps every chain converging to a normal number: no overflow, no denormals.
// The accumulators are named locals (not an array) so they live in registers at any -O level.
#define MHB_REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define MHB_REP16(X) MHB_REP12(X) X(12) X(13) X(14) X(15)
#define MHB_ACC_DECL(k) vf acc##k = zero + 0.01f * static_cast<float>(k + 1);
#define MHB_ACC_STEP(k) acc##k = acc##k * a + b;
#define MHB_ACC_SUM(k) for (int l = 0; l < lanes; l++) s += acc##k[l];
#define MHB_FMA_PROBE(NAME, ATTR, VBYTES, REP)                 \
    ATTR double NAME(long iters, float a_s, float b_s) {      \
        typedef float vf __attribute__((vector_size(VBYTES))); \
        const int lanes = (VBYTES) / 4;                        \
        const vf zero = {};                                    \
        const vf a = zero + a_s, b = zero + b_s;               \
        REP(MHB_ACC_DECL)                                      \
        for (long i = 0; i < iters; i++) {                     \
            REP(MHB_ACC_STEP)                                  \
        }                                                      \
        double s = 0.0;                                        \
        REP(MHB_ACC_SUM)                                       \
        return s;                                              \
    }

MHB_FMA_PROBE(probe_baseline, , 16, MHB_REP12)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MHB_HAVE_X86_PROBES 1
MHB_FMA_PROBE(probe_avx2, __attribute__((target("avx2,fma"))), 32, MHB_REP12)
MHB_FMA_PROBE(probe_avx512, __attribute__((target("avx512f"))), 64, MHB_REP16)
#endif

struct FmaProbe {
    mh_isa isa;
    double (*fn)(long, float, float);
    int lanes, accumulators;
};

std::vector<FmaProbe> available_probes() {
    std::vector<FmaProbe> out;
#if defined(__aarch64__)
    out.push_back({MH_ISA_SCALAR, probe_baseline, 4, 12});
    out.push_back({MH_ISA_NEON, probe_baseline, 4, 12});
#else
    out.push_back({MH_ISA_SCALAR, probe_baseline, 4, 12});
#endif
#if defined(MHB_HAVE_X86_PROBES)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        out.push_back({MH_ISA_AVX2, probe_avx2, 8, 12});
    if (__builtin_cpu_supports("avx512f")) out.push_back({MH_ISA_AVX512, probe_avx512, 16, 16});
#endif
    return out;
}

volatile float g_a = 0.9999999f, g_b = 1e-7f;  // volatile: the compiler cannot fold the probes
volatile double g_sink = 0.0;

double measure_fma(const FmaProbe& p, int threads, bool quick) {
    const double target_s = quick ? 0.03 : 0.08;
    // Calibrate the round count on one thread, then keep the best of several short timed runs
    // (the best, because anything else running on the machine only ever lowers it).
    long iters = 1 << 14;
    for (;;) {
        const auto t0 = Clock::now();
        g_sink = g_sink + p.fn(iters, g_a, g_b);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (s > 0.01 || iters > (1L << 40)) {
            iters = std::max(1L, static_cast<long>(static_cast<double>(iters) * target_s / s));
            break;
        }
        iters *= 8;
    }
    double best = 0.0;
    const int reps = quick ? 3 : 6;
    for (int rep = 0; rep < reps; rep++) {
        std::vector<double> sinks(static_cast<size_t>(threads));
        const double s = run_parallel(threads, [&](int t) {
            sinks[static_cast<size_t>(t)] = p.fn(iters, g_a, g_b);
        });
        for (double v : sinks) g_sink = g_sink + v;
        const double flops = 2.0 * p.lanes * p.accumulators * static_cast<double>(iters) * threads;
        best = std::max(best, flops / s * 1e-9);
    }
    return best;
}

// ------------------------------------------------------------------ read bandwidth
double sum_slice(const float* p, size_t n) {
    typedef float v4 __attribute__((vector_size(16)));
    v4 acc[8] = {};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 8; k++) {
            v4 x;
            std::memcpy(&x, p + i + 4 * static_cast<size_t>(k), sizeof x);
            acc[k] += x;
        }
    }
    double s = 0.0;
    for (; i < n; i++) s += p[i];
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 4; l++) s += acc[k][l];
    return s;
}

void measure_bandwidth(const std::vector<int>& thread_counts, bool quick) {
    long llc = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc < 0) llc = 0;
#endif
    g_limits.llc_bytes = llc;
    size_t bytes = size_t{512} << 20;
    if (static_cast<size_t>(llc) * 2 > bytes) bytes = static_cast<size_t>(llc) * 2;
    bytes = (bytes + 4095) / 4096 * 4096;
    g_limits.bw_buffer_bytes = bytes;
    AlignedBuffer buf(bytes);
    float* data = buf.as<float>();
    const size_t n = bytes / sizeof(float);
    const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
    // First touch from the threads that will read, then read.
    run_parallel(max_threads, [&](int t) {
        const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(max_threads);
        const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(max_threads);
        std::fill(data + lo, data + hi, 1.0f);
    });
    const int passes = quick ? 2 : 4;
    for (int threads : thread_counts) {
        double best = 0.0;
        for (int rep = 0; rep < passes; rep++) {
            std::vector<double> sinks(static_cast<size_t>(threads));
            const double s = run_parallel(threads, [&](int t) {
                const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
                const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
                sinks[static_cast<size_t>(t)] = sum_slice(data + lo, hi - lo);
            });
            for (double v : sinks) g_sink = g_sink + v;
            best = std::max(best, static_cast<double>(bytes) / s * 1e-9);
        }
        g_limits.read_gbps[threads] = best;
        std::fprintf(stderr, "machine: read bandwidth, %d thread(s): %.1f GB/s (%zu MiB buffer)\n",
                     threads, best, bytes >> 20);
    }
}

std::string fmt(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

}  // namespace

double MachineLimits::peak(mh_isa isa, int threads) const {
    auto it = peak_gflops.find({static_cast<int>(isa), threads});
    return it == peak_gflops.end() ? 0.0 : it->second;
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
            g_limits.peak_gflops[{static_cast<int>(p.isa), threads}] = g;
            std::fprintf(stderr, "machine: peak multiply-add, %s, %d thread(s): %.1f GFLOP/s\n",
                         mh_isa_name(p.isa), threads, g);
        }
    }
    measure_bandwidth(thread_counts, quick);
}

void add_machine_limits_context() {
    for (const auto& kv : g_limits.peak_gflops) {
        benchmark::AddCustomContext(std::string("peak_gflops/") +
                                        mh_isa_name(static_cast<mh_isa>(kv.first.first)) +
                                        "/threads:" + std::to_string(kv.first.second),
                                    fmt(kv.second));
    }
    for (const auto& kv : g_limits.read_gbps)
        benchmark::AddCustomContext("read_gbps/threads:" + std::to_string(kv.first), fmt(kv.second));
    if (g_limits.bw_buffer_bytes)
        benchmark::AddCustomContext("read_buffer_bytes", std::to_string(g_limits.bw_buffer_bytes));
    if (g_limits.llc_bytes) benchmark::AddCustomContext("llc_bytes", std::to_string(g_limits.llc_bytes));
}

const MachineLimits& machine_limits() { return g_limits; }

}  // namespace mhb
