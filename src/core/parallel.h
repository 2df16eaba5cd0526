/*
 * Running a call's work items on its workers.
 *
 * How many: no more than it has work items, and no more than its work can pay for. A fork-join
 * costs microseconds on a quiet machine and a scheduler tick when the other cores are busy,
 * so small calls run on the caller's thread alone.
 *
 * How: a plain `omp parallel` whose workers split the items themselves (round-robin, or an
 * atomic counter for a dynamic schedule). No worksharing construct and no 1-thread region is
 * used, because the OpenMP runtimes allocate there (libgomp for a serialized region, libomp in
 * its loop dispatch) and forward/decode must never allocate.
 *
 * Results never depend on the number of workers: each item is computed the same way on any.
 */
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

/* One worker's share: worker `tid` of `nth`. */
typedef void (*mh_worker_fn)(void* arg, int tid, int nth);

/* Runs fn on n_workers workers (the caller alone, with no OpenMP call, when 1). */
void mh_parallel(int n_workers, mh_worker_fn fn, void* arg);

/* A barrier among the workers of the current mh_parallel (nothing when nth == 1). */
void mh_barrier(int nth);

/* Next item of a dynamic schedule shared by the workers. */
long mh_next_item(long* counter);

#endif
