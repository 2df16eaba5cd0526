// The suites (suites.cc): the cases each of --mh_quick, the default suite and --mh_long runs.
#ifndef MH_BENCH_SUITES_H
#define MH_BENCH_SUITES_H

#include <vector>

#include "cases.h"

namespace mhb {

// Every variant on tiny shapes, int8 and token-major decode, the baselines, other ISAs and more
// threads once each: well under a minute.
std::vector<CaseSpec> quick_suite(const SuiteOptions& o);
// Every variant at the headline shapes (about 6 minutes on 2 cores); o.long_tails adds the
// long tails (tens of minutes).
std::vector<CaseSpec> default_suite(const SuiteOptions& o);

}  // namespace mhb

#endif
