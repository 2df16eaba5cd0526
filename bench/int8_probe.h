// Whether the linked library accepts int8 K/V on the attention core, probed once.
#ifndef MH_BENCH_INT8_PROBE_H
#define MH_BENCH_INT8_PROBE_H

#include <string>

namespace mhb {

// Empty when it does; else why not (the status of a minimal valid int8 mh_attention call).
const std::string& int8_refusal();

}  // namespace mhb

#endif
