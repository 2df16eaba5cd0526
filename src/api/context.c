#include "api/context.h"

#include <omp.h>
#include <stdlib.h>

#include "api/compute.h"
#include "dispatch/dispatch.h"

mh_context_config mh_context_config_default(void) {
    mh_context_config c = {.num_threads = 0, .isa = MH_ISA_AUTO, .compute = MH_COMPUTE_DEFAULT};
    return c;
}

mh_status mh_context_create(const mh_context_config* config, mh_context** out) {
    if (!config || !out || config->num_threads < 0 || config->num_threads > MH_MAX_THREADS)
        return MH_ERR_INVALID_ARGUMENT;
    mh_isa isa = config->isa;
    if (isa == MH_ISA_AUTO) {
        mh_status st = mh_isa_default(&isa);
        if (st != MH_OK) return st;
    } else if (isa < MH_ISA_SCALAR || isa >= MH_ISA_COUNT) {
        return MH_ERR_INVALID_ARGUMENT;
    }
    const mh_kernels* kernels = mh_dispatch_table(isa);
    if (!kernels) return MH_ERR_ISA_UNAVAILABLE;
    mh_compute compute = config->compute;
    mh_status st = mh_compute_resolve(isa, &compute);
    if (st != MH_OK) return st;
    mh_context* ctx = malloc(sizeof *ctx);
    if (!ctx) return MH_ERR_OUT_OF_MEMORY;
    ctx->magic = MH_CONTEXT_MAGIC;
    ctx->kernels = kernels;
    const int runtime = omp_get_max_threads(); /* what an OpenMP program set for its regions */
    ctx->compute = compute;
    ctx->num_threads = config->num_threads ? config->num_threads
                                           : runtime < MH_MAX_THREADS ? runtime : MH_MAX_THREADS;
    *out = ctx;
    return MH_OK;
}

void mh_context_destroy(mh_context* ctx) {
    if (!mh_context_valid(ctx)) return;
    ctx->magic = 0;
    free(ctx);
}

mh_isa mh_context_isa(const mh_context* ctx) {
    return mh_context_valid(ctx) ? ctx->kernels->isa : MH_ISA_AUTO;
}

int mh_context_num_threads(const mh_context* ctx) { return mh_context_valid(ctx) ? ctx->num_threads : 0; }

mh_compute mh_context_compute(const mh_context* ctx) {
    return mh_context_valid(ctx) ? ctx->compute : MH_COMPUTE_DEFAULT;
}
