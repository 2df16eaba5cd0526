#include "core/parallel.h"

#include <omp.h>

void mh_parallel(int n_workers, mh_worker_fn fn, void* arg) {
    if (n_workers <= 1) {
        fn(arg, 0, 1);
        return;
    }
#pragma omp parallel num_threads(n_workers)
    fn(arg, omp_get_thread_num(), omp_get_num_threads());
}

void mh_barrier(int nth) {
    if (nth > 1) {
#pragma omp barrier
    }
}

long mh_next_item(long* counter) {
    long item;
#pragma omp atomic capture
    item = (*counter)++;
    return item;
}
