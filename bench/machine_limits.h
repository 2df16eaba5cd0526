// Machine limits the cases are compared against: peak multiply-add throughput per kernel ISA
// and streaming read bandwidth, each for the thread counts the suite uses. Measured once at
// start-up, recorded in the JSON context (benchmark::AddCustomContext) and used for the
// pct_peak / pct_bw counters.
#ifndef MH_BENCH_MACHINE_LIMITS_H
#define MH_BENCH_MACHINE_LIMITS_H

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "multihead.h"

namespace mhb {

struct MachineLimits {
    // keyed by kernel_label: the ISA's name, "+bf16" for its bf16 compute mode
    std::map<std::pair<std::string, int>, double> peak_gflops;  // (label, threads) -> GFLOP/s
    std::map<std::string, const char*> peak_method;              // label -> what the probe issues
    std::map<int, double> read_gbps;                     // threads -> GB/s (1e9 bytes/s)
    std::map<int, int> read_streams;                     // threads -> parts per thread that read fastest
    size_t bw_buffer_bytes = 0;
    const char* bw_method = "";
    long llc_bytes = 0;  // last-level cache (sysfs, else the C library's, checked by reading); 0 if unknown
    const char* llc_source = "";  // "sysfs", "C library" or "measured"

    // 0 when not measured (the counter that needs it is then left out).
    // The peak of the ISA's compute mode (scalar: its f32 one for every mode; bf16: the larger
    // of its dot-product probe and the ISA's FMA probe).
    double peak(mh_isa isa, int threads, mh_compute compute = MH_COMPUTE_F32) const;
    double bandwidth(int threads) const;
};

// "avx512", "avx512+bf16": an ISA and compute mode as case names and the peaks name them.
std::string kernel_label(mh_isa isa, mh_compute compute);

// Measures every probe this CPU can run for each thread count; `quick` shortens each probe.
// Prints one line per result to stderr as it goes.
void measure_machine_limits(const std::vector<int>& thread_counts, bool quick);
// Adds the measured values as benchmark custom context (call before RunSpecifiedBenchmarks).
void add_machine_limits_context();
const MachineLimits& machine_limits();

}  // namespace mhb

#endif
