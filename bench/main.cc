// mh_bench: the multihead benchmark harness (Google Benchmark, public API only).
//
//   mh_bench [--mh_quick] [--benchmark_* flags...]
//
// --mh_quick (or MH_BENCH_QUICK=1 in the environment) runs the tiny-shape suite in well under a
// minute. Every --benchmark_* flag works as usual (--benchmark_filter=REGEX,
// --benchmark_out=FILE --benchmark_out_format=json, --benchmark_list_tests, ...).
//
// Start-up measures the machine limits (machine_limits.cc) and records them, with the library
// version and ISAs, in the JSON "context". The console shows a short set of counters per case;
// the JSON file gets all of them (cases.cc lists them).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "cases.h"
#include "machine_limits.h"

namespace {

// Every case runs with UseRealTime() (and some with MinTime() or Iterations()), for which
// Google Benchmark appends /real_time, /min_time:X, /iterations:N to the name. The reports drop
// those suffixes so names stay mode/variant/shape/dtype/isa/threads:T (the timing is recorded
// once in the context as mh_timing). --benchmark_filter still sees the full internal names.
void clean_name(benchmark::BenchmarkReporter::Run& r) {
    r.run_name.min_time.clear();
    r.run_name.min_warmup_time.clear();
    r.run_name.iterations.clear();
    r.run_name.time_type.clear();
}

class CleanJSONReporter : public benchmark::JSONReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        std::vector<Run> out = runs;
        for (Run& r : out) clean_name(r);
        benchmark::JSONReporter::ReportRuns(out);
    }
};

// The console reporter with clean names and only the headline counters, so a line fits a
// terminal; the values are final, so they are shown without the "/s" of rate counters.
class ShortConsoleReporter : public benchmark::ConsoleReporter {
public:
    using benchmark::ConsoleReporter::ConsoleReporter;
    void ReportRuns(const std::vector<Run>& runs) override {
        static const char* const keep[] = {"gflops", "pct_peak", "gbps", "pct_bw", "tokens_per_s", "rel_l2_err"};
        std::vector<Run> shown = runs;
        for (Run& r : shown) {
            clean_name(r);
            benchmark::UserCounters c;
            for (const char* k : keep) {
                auto it = r.counters.find(k);
                if (it == r.counters.end()) continue;
                c[k] = it->second;
                c[k].flags = benchmark::Counter::kDefaults;
            }
            r.counters = c;
        }
        benchmark::ConsoleReporter::ReportRuns(shown);
    }
};

// The value of --name=value (last one wins), or "" if absent.
std::string flag_value(int argc, char** argv, const char* name) {
    std::string out;
    const std::string p = std::string(name) + "=";
    for (int i = 1; i < argc; i++)
        if (std::strncmp(argv[i], p.c_str(), p.size()) == 0) out = argv[i] + p.size();
    return out;
}

bool truthy(const std::string& v);

// A boolean flag given as --name or --name=value (last one wins).
bool bool_flag(int argc, char** argv, const char* name) {
    bool out = false;
    const std::string n = name, p = n + "=";
    for (int i = 1; i < argc; i++) {
        if (n == argv[i]) out = true;
        else if (std::strncmp(argv[i], p.c_str(), p.size()) == 0) out = truthy(argv[i] + p.size());
    }
    return out;
}

bool truthy(const std::string& v) { return !(v.empty() || v == "0" || v == "false" || v == "no"); }

}  // namespace

int main(int argc, char** argv) {
    // Our own flags first; they are removed so Google Benchmark does not reject them.
    bool quick = false;
    if (const char* e = std::getenv("MH_BENCH_QUICK")) quick = truthy(e);
    {
        int w = 1;
        for (int i = 1; i < argc; i++) {
            if (std::strcmp(argv[i], "--mh_quick") == 0 || std::strcmp(argv[i], "--mh_quick=true") == 0 ||
                std::strcmp(argv[i], "--mh_quick=1") == 0) {
                quick = true;
            } else if (std::strcmp(argv[i], "--mh_quick=false") == 0 || std::strcmp(argv[i], "--mh_quick=0") == 0) {
                quick = false;
            } else {
                argv[w++] = argv[i];
            }
        }
        argc = w;
        argv[argc] = nullptr;
    }
    // Initialize() removes the flags it consumes: keep a copy to read them back.
    std::vector<char*> argv_all(argv, argv + argc + 1);
    const int argc_all = argc;
    const bool listing = bool_flag(argc, argv, "--benchmark_list_tests");
    const std::string format = flag_value(argc, argv, "--benchmark_format");
    const std::string color = flag_value(argc, argv, "--benchmark_color");
    const std::string tabular = flag_value(argc, argv, "--benchmark_counters_tabular");

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

    const std::vector<mhb::CaseSpec> cases = mhb::make_suite(quick);
    mhb::register_cases(cases, quick);

    benchmark::AddCustomContext("mh_version", mh_version_string());
    {
        mh_isa def = MH_ISA_SCALAR;
        if (mh_isa_default(&def) == MH_OK) benchmark::AddCustomContext("mh_isa_default", mh_isa_name(def));
        std::string isas;
        for (int i = 1; i < MH_ISA_COUNT; i++)
            if (mh_isa_supported(static_cast<mh_isa>(i))) isas += std::string(isas.empty() ? "" : ",") + mh_isa_name(static_cast<mh_isa>(i));
        benchmark::AddCustomContext("mh_isas_supported", isas);
    }
    benchmark::AddCustomContext("mh_suite", quick ? "quick" : "default");
    benchmark::AddCustomContext("mh_timing", "real_time (wall clock) for every case");

    if (!listing) {
        std::set<int> threads;
        for (const mhb::CaseSpec& c : cases) threads.insert(c.threads);
        mhb::measure_machine_limits(std::vector<int>(threads.begin(), threads.end()), quick);
        mhb::add_machine_limits_context();
    }

    const std::string out = flag_value(argc_all, argv_all.data(), "--benchmark_out");
    const std::string out_format = flag_value(argc_all, argv_all.data(), "--benchmark_out_format");
    CleanJSONReporter json_file;
    benchmark::BenchmarkReporter* file =
        !out.empty() && (out_format.empty() || out_format == "json") ? &json_file : nullptr;
    if (format.empty() || format == "console") {
        // Colour as Google Benchmark's auto mode (only on a terminal); tabular counters (one
        // column each, a header per group) unless --benchmark_counters_tabular=false.
        int opts = benchmark::ConsoleReporter::OO_None;
        const char* term = std::getenv("TERM");
        const bool tty = isatty(STDOUT_FILENO) && term && std::strcmp(term, "dumb") != 0;
        if (color.empty() || color == "auto" ? tty : truthy(color)) opts |= benchmark::ConsoleReporter::OO_Color;
        if (tabular.empty() || truthy(tabular)) opts |= benchmark::ConsoleReporter::OO_Tabular;
        ShortConsoleReporter display(static_cast<benchmark::ConsoleReporter::OutputOptions>(opts));
        benchmark::RunSpecifiedBenchmarks(&display, file);
    } else if (format == "json") {
        CleanJSONReporter display;
        benchmark::RunSpecifiedBenchmarks(&display, file);
    } else {
        benchmark::RunSpecifiedBenchmarks(nullptr, file);
    }
    mhb::release_fixtures();
    benchmark::Shutdown();
    return 0;
}
