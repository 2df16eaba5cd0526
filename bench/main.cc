// mh_bench: the multihead benchmark harness (Google Benchmark, public API only).
//
//   mh_bench [options] [--benchmark_* flags...]
//
//   --mh_quick               the tiny-shape suite, well under a minute (or MH_BENCH_QUICK=1)
//   --mh_long                the default suite plus its long tails: 4K-token prefill and encoder
//                            layers, decode through the layer at 16K/32K cached keys (MHA,
//                            CollabHead, DCMHA; filling those caches through the layers takes
//                            minutes)
//   --mh_threads=N           every case at N threads (default: 1 thread, plus a thread-scaling
//                            set at every processor)
//   --weights=FILE           the layer modes start from this attention layer (safetensors,
//                            PyTorch names: safetensors.h) instead of a seeded MHA layer
//   --heads=H                its number of query heads (else the file's __metadata__)
//   --mh_weights_prefix=P    tensor name prefix, e.g. model.layers.0.self_attn. (default: found)
//   --mh_min_time=S          seconds per repetition (default 0.1; quick 0.02)
//   --mh_repetitions=R       repetitions per case, the median reported (default 3, fewer for
//                            calls over 10 ms: case_repetitions() in cases.cc; quick 1)
//   --mh_interleave          the repetitions of all selected cases run in random order
//                            (Google Benchmark's random interleaving), so a ratio between two
//                            cases is not skewed by the machine slowing down in between; every
//                            case keeps its fixture (caches, packed layers) for the whole run,
//                            so select few cases (--benchmark_filter); peak_rss_bytes then
//                            counts from the case's first start, and the decode core cases
//                            read one K/V copy (no rotation of copies through the LLC)
//   --mh_selfcheck           run the harness's own checks (safetensors loader errors, weight
//                            derivation, oracle, baseline) and exit
//   --mh_write_example=FILE  write a seeded MHA layer (d_model 256, H 8) as F16 safetensors
//   --mh_list                print the case names of the suite and exit
//   --help                   this text, then Google Benchmark's flags
// Every --benchmark_* flag works as usual (--benchmark_filter=REGEX, --benchmark_out=FILE
// --benchmark_out_format=json, ...). Options taking a value accept "--opt=V" and "--opt V".
//
// Start-up measures the machine limits (machine_limits.cc) and records them, with the library
// version, ISAs, CPU and memory, in the JSON "context". The console shows one table row per
// case (the median of its repetitions, and cv, the time's coefficient of variation over them;
// dist_base, the output's relative L2 distance from the base (MHA) layer's); the name is printed
// when the case starts, after "k/N" and an estimate of the time the rest of the run takes, so
// the running case and the progress are always visible. x_bound is the time over its bound
// max(bytes / bandwidth, FLOPs / peak); q_err an int8 case's output against the same call on
// f32 K/V. A case the library cannot run for a reason outside the harness (int8 K/V on a library
// without them) prints SKIPPED and its reason, and is not counted as a result or an error.
#include <regex.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "blas_baseline.h"
#include "cases.h"
#include "machine_limits.h"
#include "model.h"
#include "safetensors.h"

#if defined(MHB_HAVE_OPENBLAS)
#include <cblas.h>
#include <strings.h>
#endif

int mh_bench_selfcheck();  // selfcheck.cc

namespace {

// Google Benchmark appends /real_time, /min_time:X, /iterations:N, /repeats:R to names; the
// reports drop them so names stay mode/variant/shape/kvdtype/isa/threads:T. --benchmark_filter still sees
// the full internal names.
void clean_name(benchmark::BenchmarkReporter::Run& r) {
    r.run_name.min_time.clear();
    r.run_name.min_warmup_time.clear();
    r.run_name.iterations.clear();
    r.run_name.time_type.clear();
    r.run_name.repetitions.clear();
}

class CleanJSONReporter : public benchmark::JSONReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        std::vector<Run> out = runs;
        for (Run& r : out) clean_name(r);
        benchmark::JSONReporter::ReportRuns(out);
    }
};

std::string si(double v, int prec = 2) {
    char b[32];
    const char* suffix = "";
    double a = std::fabs(v);
    if (a >= 1e9) v /= 1e9, suffix = "G";
    else if (a >= 1e6) v /= 1e6, suffix = "M";
    else if (a >= 1e3) v /= 1e3, suffix = "k";
    std::snprintf(b, sizeof b, "%.*f%s", prec, v, suffix);
    return b;
}

// The "k/N, time left" column: the cases Google Benchmark will run (the suite through
// --benchmark_filter, matched as Google Benchmark does: POSIX extended regex, a leading '-'
// negates), each weighted by a rough cost; the time left is the elapsed time scaled by the
// remaining cases' share of that cost.
class Progress {
public:
    Progress(const std::vector<mhb::CaseSpec>& cases, const mhb::SuiteOptions& o, const std::string& filter) {
        std::string spec = filter.empty() || filter == "all" ? "." : filter;
        const bool negate = spec[0] == '-';
        if (negate) spec.erase(0, 1);
        regex_t re;
        const bool ok = regcomp(&re, spec.c_str(), REG_EXTENDED | REG_NOSUB) == 0;
        for (const mhb::CaseSpec& c : cases) {
            const bool match = !ok || regexec(&re, mhb::registered_name(c, o).c_str(), 0, nullptr, 0) == 0;
            if (match != negate) cost_.push_back(mhb::expected_case_seconds(c, o));
        }
        if (ok) regfree(&re);
        for (double x : cost_) total_ += x;
    }
    // The column for the case that starts now.
    std::string next() {
        const auto now = std::chrono::steady_clock::now();
        if (k_ == 0) t0_ = now;
        char b[96];
        const size_t n = cost_.size();
        const double elapsed = std::chrono::duration<double>(now - t0_).count();
        if (k_ > 0 && k_ < n && done_ > 0) {
            const int left = static_cast<int>(std::min(elapsed * (total_ - done_) / done_ + 0.5, 5999.0));
            std::snprintf(b, sizeof b, "%4zu/%-4zu %3d:%02d ", k_ + 1, n, left / 60, left % 60);
        } else {
            std::snprintf(b, sizeof b, "%4zu/%-4zu %6s ", k_ + 1, n, "");
        }
        if (k_ < n) done_ += cost_[k_];
        k_++;
        return b;
    }
    static constexpr int width = 17;  // of next()'s column

private:
    std::vector<double> cost_;
    double total_ = 0, done_ = 0;
    size_t k_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

// One row per case: the name is printed when the case starts (the hook), the numbers when it
// ends, so the running case is always on screen, in a terminal or a log.
class TableReporter : public benchmark::BenchmarkReporter {
public:
    TableReporter(size_t name_width, Progress* progress) : w_(name_width), progress_(progress) {}

    bool ReportContext(const Context&) override {
        std::printf("%-*s%-*s %10s %5s %8s %6s %8s %6s %7s %8s %9s %9s %9s\n", Progress::width, "   k/N     left", static_cast<int>(w_),
                    "case", "ms/call", "cv", "GFLOP/s", "%peak", "GB/s", "%bw", "x_bound", "tok/s", "rel_err", "q_err", "dist_base");
        std::printf("%s\n", std::string(Progress::width + w_ + 99, '-').c_str());
        std::fflush(stdout);
        return true;
    }
    void start(const std::string& name) {
        std::printf("%s%-*s", progress_->next().c_str(), static_cast<int>(w_), name.c_str());
        std::fflush(stdout);
        open_ = true;
    }
    // With repetitions the runs are aggregates (mean, median, stddev, cv): the row shows the
    // median and the time's cv; a single repetition reports its one run.
    void ReportRuns(const std::vector<Run>& runs) override {
        const Run* row = nullptr;
        double cv = -1;
        for (const Run& r : runs) {
            if (r.error_occurred) {
                row = &r;
                break;
            }
            if (r.run_type == Run::RT_Aggregate) {
                if (r.aggregate_name == "median") row = &r;
                if (r.aggregate_name == "cv") cv = r.real_accumulated_time;
            } else if (!row) {
                row = &r;
            }
        }
        if (!row) return;
        Run r = *row;
        clean_name(r);
        if (!open_) std::printf("%s%-*s", progress_->next().c_str(), static_cast<int>(w_), r.run_name.str().c_str());
        open_ = false;
        if (r.error_occurred && r.error_message.rfind("skipped: ", 0) == 0) {  // e.g. no int8 in this library
            std::printf(" SKIPPED: %s\n", r.error_message.c_str() + 9);
            std::fflush(stdout);
            return;
        }
        if (r.error_occurred) {
            std::printf(" ERROR: %s\n", r.error_message.c_str());
            errors_++;
            std::fflush(stdout);
            return;
        }
        auto c = [&r](const char* k) {
            auto it = r.counters.find(k);
            return it == r.counters.end() ? 0.0 : it->second.value;
        };
        const double ms = r.GetAdjustedRealTime() * (r.time_unit == benchmark::kMillisecond ? 1.0
                                                     : r.time_unit == benchmark::kMicrosecond ? 1e-3
                                                     : r.time_unit == benchmark::kNanosecond ? 1e-6
                                                                                              : 1e3);
        char err[16], dist[16], cvs[16], qerr[16], xb[16];
        std::snprintf(err, sizeof err, "%.1e", c("rel_l2_err"));
        if (c("q_err") < 0) std::snprintf(qerr, sizeof qerr, "-");
        else std::snprintf(qerr, sizeof qerr, "%.1e", c("q_err"));
        if (c("x_bound") <= 0) std::snprintf(xb, sizeof xb, "-");
        else std::snprintf(xb, sizeof xb, "%.2f", c("x_bound"));
        if (c("dist_from_base") < 0) std::snprintf(dist, sizeof dist, "-");
        else std::snprintf(dist, sizeof dist, "%.3f", c("dist_from_base"));
        if (cv < 0) std::snprintf(cvs, sizeof cvs, "-");
        else std::snprintf(cvs, sizeof cvs, "%.0f%%", 100.0 * cv);
        std::printf(" %10.3f %5s %8.1f %6.1f %8.2f %6.1f %7s %8s %9s %9s %9s%s\n", ms, cvs, c("gflops"), c("pct_peak"), c("gbps"),
                    c("pct_bw"), xb, si(c("tokens_per_s"), 1).c_str(), err, qerr, dist, c("cold") > 0 ? "  cold" : "");
        std::fflush(stdout);
    }
    int errors() const { return errors_; }

private:
    size_t w_;
    Progress* progress_;
    bool open_ = false;
    int errors_ = 0;
};

// --name=value or --name value (last one wins); removes it from argv. Returns whether found.
bool take_value(int* argc, char** argv, std::initializer_list<const char*> names, std::string* value) {
    bool found = false;
    int w = 1;
    for (int i = 1; i < *argc; i++) {
        bool used = false;
        for (const char* n : names) {
            const size_t len = std::strlen(n);
            if (std::strncmp(argv[i], n, len) == 0 && argv[i][len] == '=') {
                *value = argv[i] + len + 1, found = used = true;
            } else if (std::strcmp(argv[i], n) == 0 && i + 1 < *argc) {
                *value = argv[++i], found = used = true;
            }
        }
        if (!used) argv[w++] = argv[i];
    }
    *argc = w;
    argv[w] = nullptr;
    return found;
}

bool truthy(const std::string& v) { return !(v.empty() || v == "0" || v == "false" || v == "no"); }

// --name or --name=BOOL; removes it.
bool take_flag(int* argc, char** argv, const char* name) {
    bool out = false;
    int w = 1;
    const size_t len = std::strlen(name);
    for (int i = 1; i < *argc; i++) {
        if (std::strcmp(argv[i], name) == 0) out = true;
        else if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') out = truthy(argv[i] + len + 1);
        else argv[w++] = argv[i];
    }
    *argc = w;
    argv[w] = nullptr;
    return out;
}

std::string flag_value(int argc, char** argv, const char* name) {
    std::string out;
    const std::string p = std::string(name) + "=";
    for (int i = 1; i < argc; i++)
        if (std::strncmp(argv[i], p.c_str(), p.size()) == 0) out = argv[i] + p.size();
    return out;
}

std::string read_first(const char* path, const char* key) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) {
            const size_t c = line.find(':');
            std::string v = c == std::string::npos ? line : line.substr(c + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v;
        }
    return "";
}

void add_machine_context(const mhb::SuiteOptions& o, const std::string& weights_desc) {
    benchmark::AddCustomContext("mh_version", mh_version_string());
    mh_isa def = MH_ISA_SCALAR;
    if (mh_isa_default(&def) == MH_OK) benchmark::AddCustomContext("mh_isa_default", mh_isa_name(def));
    std::string isas;
    for (int i = 1; i < MH_ISA_COUNT; i++)
        if (mh_isa_supported(static_cast<mh_isa>(i))) isas += std::string(isas.empty() ? "" : ",") + mh_isa_name(static_cast<mh_isa>(i));
    benchmark::AddCustomContext("mh_isas_supported", isas);
    benchmark::AddCustomContext("mh_suite", o.quick ? "quick" : o.long_tails ? "long" : "default");
    const int reps = mhb::repetitions(o);
    benchmark::AddCustomContext("mh_timing", "real_time (wall clock) for every case; " +
                                                 (reps > 1 ? "up to " + std::to_string(reps) +
                                                                 " repetitions per case (fewer for calls over 10 ms), the median reported"
                                                           : std::string("1 repetition per case")));
    benchmark::AddCustomContext("mh_weights", weights_desc);
    benchmark::AddCustomContext("mh_blas", mhb::blas_description());
#if defined(MHB_HAVE_OPENBLAS)
    {
        const char* core = openblas_get_corename();
        std::string note = std::string(core ? core : "?");
        if (const char* det = std::getenv("MHB_OPENBLAS_DETECTED"))
            note += std::string(" (set by mh_bench through OPENBLAS_CORETYPE: OpenBLAS detected ") + det +
                    ", its generic kernels, on this CPU model)";
        else if (std::getenv("OPENBLAS_CORETYPE"))
            note += " (OPENBLAS_CORETYPE from the environment)";
        benchmark::AddCustomContext("mh_blas_coretype", note);
    }
#endif
    const std::string cpu = read_first("/proc/cpuinfo", "model name");
    if (!cpu.empty()) benchmark::AddCustomContext("mh_cpu_model", cpu);
    const std::string fam = read_first("/proc/cpuinfo", "cpu family"), model = read_first("/proc/cpuinfo", "model\t");
    const std::string vendor = read_first("/proc/cpuinfo", "vendor_id"), stepping = read_first("/proc/cpuinfo", "stepping");
    if (!fam.empty())
        benchmark::AddCustomContext("mh_cpu_id", vendor + " family " + fam + " model " + model + " stepping " + stepping);
    const std::string flags = read_first("/proc/cpuinfo", "flags");
    if (!flags.empty()) benchmark::AddCustomContext("mh_hypervisor", flags.find(" hypervisor") != std::string::npos ? "yes (a virtual machine)" : "no");
    const std::string mem = read_first("/proc/meminfo", "MemTotal");
    if (!mem.empty()) benchmark::AddCustomContext("mh_mem_total", mem);
    struct utsname u;
    if (uname(&u) == 0) benchmark::AddCustomContext("mh_os", std::string(u.sysname) + " " + u.release + " " + u.machine);
#if defined(__clang__)
    benchmark::AddCustomContext("mh_bench_compiler", std::string("clang ") + __clang_version__);
#elif defined(__GNUC__)
    benchmark::AddCustomContext("mh_bench_compiler", std::string("gcc ") + __VERSION__);
#endif
    benchmark::AddCustomContext("mh_hardware_threads", std::to_string(std::thread::hardware_concurrency()));
    const bool clear_refs = mhb::reset_peak_rss();
    benchmark::AddCustomContext("peak_rss_method",
                                clear_refs ? "RSS growth of the case: VmHWM (reset via /proc/self/clear_refs at case start) minus VmRSS before setup"
                                           : "process peak RSS (VmHWM/ru_maxrss, not resettable here) minus VmRSS before setup");
}

// OpenBLAS picks its kernels from the CPU model at load time and falls back to old generic
// ones for models it does not know (0.3.21 on a 2023 Xeon: "Prescott", SSE3, ~10x below its
// AVX-512 kernels). The baseline must be what OpenBLAS can do on this CPU, so when it chose a
// generic core and the CPU has AVX-512 (AVX2+FMA), mh_bench restarts itself once with
// OPENBLAS_CORETYPE=SkylakeX (Haswell), which OpenBLAS reads at load time. A user's own
// OPENBLAS_CORETYPE is left alone. The context records both (mh_blas_coretype).
void fix_openblas_core(char** argv) {
#if defined(MHB_HAVE_OPENBLAS) && defined(__x86_64__)
    if (std::getenv("OPENBLAS_CORETYPE")) return;
    const char* core = openblas_get_corename();
    if (!core) return;
    for (const char* good : {"haswell", "skylakex", "cooperlake", "sapphirerapids", "zen"})
        if (strcasecmp(core, good) == 0) return;
    __builtin_cpu_init();
    const char* want = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("MHB_OPENBLAS_DETECTED", core, 1);
    execv("/proc/self/exe", argv);  // only returns on failure: carry on with the detected core
    unsetenv("OPENBLAS_CORETYPE");
#else
    (void)argv;
#endif
}

// --help: the --mh_* flags (this file's header), then Google Benchmark prints its own.
void print_help() {
    std::printf(
        "mh_bench: the multihead benchmark harness (bench/README.md)\n\n"
        "  mh_bench [options] [--benchmark_* flags...]\n\n"
        "  --mh_quick               the tiny-shape suite, well under a minute (or MH_BENCH_QUICK=1)\n"
        "  --mh_long                the default suite plus its long tails (4K-token prefill and encoder\n"
        "                           layers, decode through the layer at 16K/32K cached keys)\n"
        "  --mh_threads=N           every case at N threads (default: 1, plus a scaling set at every\n"
        "                           processor)\n"
        "  --weights=FILE           the layer modes start from this attention layer (safetensors)\n"
        "  --heads=H                its number of query heads (else the file's __metadata__)\n"
        "  --mh_weights_prefix=P    tensor name prefix, e.g. model.layers.0.self_attn. (default: found)\n"
        "  --mh_min_time=S          seconds per repetition (default 0.1; quick 0.02)\n"
        "  --mh_repetitions=R       repetitions per case, the median reported (default 3, fewer for\n"
        "                           calls over 10 ms; quick 1)\n"
        "  --mh_interleave          the repetitions of all selected cases in random order (to compare\n"
        "                           two cases; select few with --benchmark_filter)\n"
        "  --mh_selfcheck           run the harness's own checks and exit\n"
        "  --mh_write_example=FILE  write a seeded MHA layer (d_model 256, H 8) as F16 safetensors\n"
        "  --mh_list                print the case names of the suite and exit\n"
        "  --help                   this text, then Google Benchmark's flags\n\n"
        "Options taking a value accept --opt=V and --opt V.\n\n"
        "Google Benchmark's flags:\n");
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            print_help();
            char help_flag[] = "--help";
            char* gb_argv[] = {argv[0], help_flag, nullptr};
            int gb_argc = 2;
            benchmark::Initialize(&gb_argc, gb_argv);  // prints its flags and exits
            return 0;
        }
    fix_openblas_core(argv);

#if defined(__GLIBC__)
    // peak_rss_bytes is a case's RSS growth: every buffer of 1 MiB or more gets its own mapping
    // and goes back to the system when freed, and the heap top is trimmed, so one case's memory
    // is neither counted in, nor silently reused by, the next (glibc otherwise raises its mmap
    // threshold after the first large free and keeps freed memory resident).
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
    // Our own flags first; they are removed so Google Benchmark does not reject them.
    mhb::SuiteOptions opt;
    if (const char* e = std::getenv("MH_BENCH_QUICK")) opt.quick = truthy(e);
    if (take_flag(&argc, argv, "--mh_quick")) opt.quick = true;
    if (take_flag(&argc, argv, "--mh_long")) opt.long_tails = true;
    opt.interleave = take_flag(&argc, argv, "--mh_interleave");
    const bool selfcheck = take_flag(&argc, argv, "--mh_selfcheck");
    const bool list = take_flag(&argc, argv, "--mh_list");
    std::string v, weights_path, prefix, example;
    int heads = 0;
    if (take_value(&argc, argv, {"--mh_threads", "--threads"}, &v)) opt.threads = std::atoi(v.c_str());
    if (take_value(&argc, argv, {"--mh_min_time"}, &v)) opt.min_time = std::atof(v.c_str());
    if (take_value(&argc, argv, {"--mh_repetitions"}, &v)) opt.repetitions = std::atoi(v.c_str());
    take_value(&argc, argv, {"--weights", "--mh_weights"}, &weights_path);
    if (take_value(&argc, argv, {"--heads", "--mh_heads"}, &v)) heads = std::atoi(v.c_str());
    take_value(&argc, argv, {"--mh_weights_prefix"}, &prefix);
    take_value(&argc, argv, {"--mh_write_example"}, &example);
    if (opt.threads < 0) {
        std::fprintf(stderr, "mh_bench: --mh_threads must be >= 1\n");
        return 2;
    }

    if (selfcheck) return mh_bench_selfcheck();
    if (!example.empty()) {
        const mhb::LayerWeights w = mhb::random_mha_layer(256, 8, 32, 256, true, 7);
        const std::vector<uint8_t> bytes = mhb::encode_attention_layer(w, "F16", "", true);
        FILE* f = std::fopen(example.c_str(), "wb");
        if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
            std::fprintf(stderr, "mh_bench: cannot write %s\n", example.c_str());
            return 1;
        }
        std::printf("wrote %s: one MHA layer, d_model 256, 8 heads of 32, with biases, F16 (%zu bytes)\n",
                    example.c_str(), bytes.size());
        return 0;
    }

    mhb::LayerWeights file_layer;
    std::string weights_desc = "seeded MHA layers (uniform +-1/sqrt(fan_in), no bias)";
    if (!weights_path.empty()) {
        std::string err;
        if (!mhb::load_attention_layer_file(weights_path, heads, prefix, &file_layer, &err)) {
            std::fprintf(stderr, "mh_bench: --weights: %s\n", err.c_str());
            return 2;
        }
        opt.file_layer = &file_layer;
        weights_desc = weights_path + " (d_model " + std::to_string(file_layer.d_model) + ", H " +
                       std::to_string(file_layer.n_heads) + ", Hkv " + std::to_string(file_layer.n_kv_heads) + ", D " +
                       std::to_string(file_layer.head_dim) + (file_layer.bias ? ", bias" : "") + ")";
        std::fprintf(stderr, "mh_bench: layer modes use %s\n", weights_desc.c_str());
    }

    // Initialize() removes the flags it consumes: keep a copy to read them back.
    std::vector<char*> argv_all(argv, argv + argc + 1);
    const int argc_all = argc;
    const std::string format = flag_value(argc, argv, "--benchmark_format");

    std::vector<char*> gb_argv(argv, argv + argc);
    char interleave_flag[] = "--benchmark_enable_random_interleaving=true";
    if (opt.interleave) gb_argv.push_back(interleave_flag);
    gb_argv.push_back(nullptr);
    int gb_argc = static_cast<int>(gb_argv.size()) - 1;
    benchmark::Initialize(&gb_argc, gb_argv.data());
    argc = gb_argc, argv = gb_argv.data();
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

    const std::vector<mhb::CaseSpec> cases = mhb::make_suite(opt);
    if (list) {
        for (const mhb::CaseSpec& c : cases) std::printf("%s\n", mhb::case_name(c).c_str());
        return 0;
    }
    mhb::register_cases(cases, opt);
    add_machine_context(opt, weights_desc);

    {
        std::set<int> threads = {1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
        for (const mhb::CaseSpec& c : cases) threads.insert(c.threads);
        mhb::measure_machine_limits(std::vector<int>(threads.begin(), threads.end()), opt.quick);
        mhb::add_machine_limits_context();
    }

    const std::string out = flag_value(argc_all, argv_all.data(), "--benchmark_out");
    const std::string out_format = flag_value(argc_all, argv_all.data(), "--benchmark_out_format");
    CleanJSONReporter json_file;
    benchmark::BenchmarkReporter* file = !out.empty() && (out_format.empty() || out_format == "json") ? &json_file : nullptr;
    int errors = 0;
    if (format.empty() || format == "console") {
        size_t width = 40;
        for (const mhb::CaseSpec& c : cases) width = std::max(width, mhb::case_name(c).size());
        Progress progress(cases, opt, flag_value(argc_all, argv_all.data(), "--benchmark_filter"));
        TableReporter display(width, &progress);
        // interleaved cases start before the previous one's row is printed: no early name
        if (!opt.interleave) mhb::set_case_start_hook([&display](const std::string& name) { display.start(name); });
        benchmark::RunSpecifiedBenchmarks(&display, file);
        errors = display.errors();
    } else if (format == "json") {
        CleanJSONReporter display;
        benchmark::RunSpecifiedBenchmarks(&display, file);
    } else {
        benchmark::RunSpecifiedBenchmarks(nullptr, file);
    }
    mhb::release_fixtures();
    benchmark::Shutdown();
    return errors ? 1 : 0;
}
