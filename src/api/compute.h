/* Compute modes (mh_compute): names, support on this CPU, and the resolution of DEFAULT. */
#ifndef MH_API_COMPUTE_H
#define MH_API_COMPUTE_H
#include "multihead.h"

/* Resolves *c for a context on `isa`: DEFAULT becomes the environment's MH_COMPUTE ("f32",
 * "bf16", "f16"), else F32. MH_ERR_INVALID_ARGUMENT for an unknown value or name,
 * MH_ERR_ISA_UNAVAILABLE when isa cannot run the mode here. */
mh_status mh_compute_resolve(mh_isa isa, mh_compute* c);

/* Resolves a layer's or a call's mode against its context's: DEFAULT takes ctx_compute; any
 * other mode must run on isa (same errors as above). */
mh_status mh_compute_pick(mh_isa isa, mh_compute ctx_compute, mh_compute* c);

#endif
