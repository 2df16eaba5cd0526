/* The context: a chosen kernel table and a thread count. Immutable after create. */
#ifndef MH_API_CONTEXT_H
#define MH_API_CONTEXT_H
#include "kernels/kernels.h"

struct mh_context {
    uint64_t magic; /* MH_CONTEXT_MAGIC while alive; cleared by destroy */
    const mh_kernels* kernels;
    int num_threads; /* >= 1 */
    mh_compute compute; /* resolved: never MH_COMPUTE_DEFAULT */
};

/* Marks a live context: a destroyed one or another object passed as a context is refused
 * (MH_ERR_INVALID_ARGUMENT) instead of being read as one. */
#define MH_CONTEXT_MAGIC UINT64_C(0x6d68436f6e746578) /* "mhContex" */

static inline int mh_context_valid(const mh_context* ctx) {
    return ctx && ctx->magic == MH_CONTEXT_MAGIC;
}

#endif
