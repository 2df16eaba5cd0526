/* The context: a chosen kernel table and a thread count. Immutable after create. */
#ifndef MH_API_CONTEXT_H
#define MH_API_CONTEXT_H
#include "kernels/kernels.h"

struct mh_context {
    const mh_kernels* kernels;
    int num_threads; /* >= 1 */
};

#endif
