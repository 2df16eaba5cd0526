/*
 * What the two MPI examples share (docs/scale-out.md): command-line numbers, wall-clock
 * timing with medians, the relative L2 error of a result against the single-process one, and
 * a workspace of the size the library asks for. Header-only, like example_util.h.
 */
#ifndef MH_MPI_EXAMPLE_UTIL_H
#define MH_MPI_EXAMPLE_UTIL_H

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* The value of "--name N" in argv, or dflt. */
static inline int arg_int(int argc, char** argv, const char* name, int dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return atoi(argv[i + 1]);
    return dflt;
}

/* 1 if the flag "--name" is in argv. */
static inline int arg_flag(int argc, char** argv, const char* name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

static inline double now_s(void) { return MPI_Wtime(); }

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* The median of t [n] (sorted in place), in milliseconds. */
static inline double median_ms(double* t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return 1e3 * (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
}

/* ||got - want|| / ||want|| over n values, accumulated into *num, *den (sums of squares). */
static inline void rel_l2_add(const float* got, const float* want, size_t n, double* num, double* den) {
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        *num += d * d, *den += (double)want[i] * want[i];
    }
}

/* A 64-byte aligned buffer of at least `bytes` (never NULL: exits on failure). */
static inline void* aligned_buffer(size_t bytes) {
    void* p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!p) MPI_Abort(MPI_COMM_WORLD, 3);
    return p;
}

#endif /* MH_MPI_EXAMPLE_UTIL_H */
