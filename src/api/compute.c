#include "api/compute.h"

#include <stdlib.h>
#include <string.h>

#include "dispatch/cpu_features.h"
#include "dispatch/dispatch.h"

static const char* const names[MH_COMPUTE_COUNT] = {"default", "f32", "bf16", "f16"};

const char* mh_compute_name(mh_compute compute) {
    return compute >= 0 && compute < MH_COMPUTE_COUNT ? names[compute] : "unknown";
}

/* A mode runs on isa when its kernels are compiled in (the table's slots are set) and the CPU
 * has the instructions they use. F16 has no kernels yet on any ISA. The bf16 slot read is one
 * mh_dispatch_bf16_ready never changes (it swaps the GEMMs while other threads may ask). */
int mh_compute_supported(mh_isa isa, mh_compute compute) {
    const mh_kernels* k = mh_dispatch_table(isa);
    if (!k) return 0;
    if (compute == MH_COMPUTE_F32) return 1;
    return compute == MH_COMPUTE_BF16 && k->round_bf16 && mh_cpu_has_bf16(isa);
}

const char* mh_compute_kernels(mh_isa isa, mh_compute compute) {
    if (!mh_compute_supported(isa, compute)) return NULL;
    if (compute == MH_COMPUTE_F32) return "f32";
    mh_dispatch_bf16_ready();
    return mh_dispatch_table(isa)->bf16_gemm_name;
}

/* A supported BF16 call readies the mode first (mh_dispatch_bf16_ready: AMX's GEMMs). */
static mh_status check(mh_isa isa, mh_compute c) {
    if (c <= MH_COMPUTE_DEFAULT || c >= MH_COMPUTE_COUNT) return MH_ERR_INVALID_ARGUMENT;
    if (!mh_compute_supported(isa, c)) return MH_ERR_ISA_UNAVAILABLE;
    if (c == MH_COMPUTE_BF16) mh_dispatch_bf16_ready();
    return MH_OK;
}

mh_status mh_compute_resolve(mh_isa isa, mh_compute* c) {
    if (*c == MH_COMPUTE_DEFAULT) {
        const char* env = getenv("MH_COMPUTE");
        *c = MH_COMPUTE_F32;
        if (env && *env) {
            int found = 0;
            for (int i = MH_COMPUTE_F32; i < MH_COMPUTE_COUNT; i++)
                if (strcmp(env, names[i]) == 0) *c = (mh_compute)i, found = 1;
            if (!found) return MH_ERR_INVALID_ARGUMENT;
        }
    }
    return check(isa, *c);
}

mh_status mh_compute_pick(mh_isa isa, mh_compute ctx_compute, mh_compute* c) {
    if (*c == MH_COMPUTE_DEFAULT) {
        *c = ctx_compute;
        return MH_OK;
    }
    return check(isa, *c);
}
