/*
 * Reader of the reference-vector files written by tests/data/gen_*_vectors.py (PyTorch).
 *
 * File format ("MHTVEC01"), every integer and float little-endian:
 *     char   magic[8] = "MHTVEC01"
 *     uint32 n_entries
 *     n_entries times:
 *         uint32 name_len; char name[name_len]   (ASCII, no NUL)
 *         uint32 dtype                           (0 = float32, 1 = int32)
 *         uint32 ndim                            (0..4; 0 = scalar, one element)
 *         uint32 dims[ndim]
 *         4-byte data[prod(dims)]                (row-major)
 * Each generator's docstring lists the entries of its files.
 */
#ifndef MH_TEST_TORCH_VECTORS_H
#define MH_TEST_TORCH_VECTORS_H
#include <stddef.h>

#include "multihead.h"

#define MAX_ENTRIES 64
#define MAX_NAME 32

typedef struct tv_entry {
    char name[MAX_NAME];
    int dtype; /* 0 = f32, 1 = i32 */
    int ndim;
    int dims[4];
    size_t count;
    void* data; /* float* or int32_t*, host order */
} tv_entry;

typedef struct tv_file {
    char path[1024];
    int n;
    tv_entry e[MAX_ENTRIES];
} tv_file;

/* Loads dir/name; 1 on success, else prints why and returns 0 (f holds nothing then). */
int tv_load(tv_file* f, const char* dir, const char* name);
void tv_free(tv_file* f);
/* The entry called name, or NULL. */
const tv_entry* tv_find(const tv_file* f, const char* name);
/* An int32 scalar; clears *ok and returns -1 if absent. */
int tv_int(const tv_file* f, const char* name, int* ok);
/* A tensor of the given dtype and shape; NULL (and *ok cleared) if absent or shaped otherwise. */
const void* tv_tensor(const tv_file* f, const char* name, int dtype, int ndim, const int* dims,
                      int* ok);
/* A float32 tensor of ndim dimensions d0.. (unused trailing ones ignored). */
const float* tv_f32(const tv_file* f, const char* name, int ndim, int d0, int d1, int d2, int d3,
                    int* ok);

/* The projections of a layer (w_q [H*D, d], w_k [Hkv*D, kdim], w_v [Hkv*D, vdim], w_o [d, H*D],
 * and when bias b_q, b_k, b_v, b_o) into w's pointers; clears *ok if one is missing or shaped
 * otherwise. */
void tv_layer_weights(const tv_file* f, int d, int kdim, int vdim, int H, int Hkv, int D, int bias,
                      mh_layer_weights* w, int* ok);

/* The body of a vector test: 77 if MH_ISA names an ISA this machine lacks; else fn on each
 * file of names, read from $MH_TEST_DATA (unset, missing or malformed: a failure, not a skip),
 * and the test's exit code (test_exit_code(test)). */
int tv_run_files(const char* test, const char* const* names, size_t n,
                 void (*fn)(const tv_file* f, const char* name));

#endif
