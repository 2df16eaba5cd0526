/* How many workers a call gets: no more than it has work items, and no more than its work can
 * pay for. A fork-join costs microseconds on a quiet machine and a scheduler tick when the
 * other cores are busy, so small calls run on the caller's thread alone. Results never depend
 * on this choice (every work item is computed the same way on any thread). */
#ifndef MH_CORE_PARALLEL_H
#define MH_CORE_PARALLEL_H
#include <stddef.h>

/* FLOPs that justify one more worker (about 80 us of work at 100 GFLOP/s). */
#define MH_FLOPS_PER_WORKER 8e6

static inline int mh_workers(int threads, size_t items, double flops) {
    double by_work = flops / MH_FLOPS_PER_WORKER;
    int n = threads;
    if ((size_t)n > items) n = (int)items;
    if (by_work < (double)n) n = (int)by_work;
    return n < 1 ? 1 : n;
}

#endif
