/*
 * A small safetensors reader for tiny_decoder: the whole file in memory, F32 and I32 tensors
 * of up to 5 dimensions, and the "__metadata__" strings. Format: an 8-byte little-endian
 * header length, a JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]},
 * "__metadata__": {key: value}}, then the data (offsets relative to its start).
 */
#ifndef TINY_SAFETENSORS_READ_H
#define TINY_SAFETENSORS_READ_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 5

typedef enum st_dtype { ST_F32, ST_I32 } st_dtype;

typedef struct st_tensor {
    char name[64];
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void* data; /* [shape...] row-major, 4-byte aligned, inside st_file.blob */
} st_tensor;

typedef struct st_meta {
    char key[32], value[32];
} st_meta;

typedef struct st_file {
    st_tensor* tensors; /* [n_tensors] */
    int n_tensors;
    st_meta* meta;      /* [n_meta] */
    int n_meta;
    void* blob;         /* the data section */
} st_file;

/* Reads `path`; 0 on success, else -1 with a message printed (nothing to close). */
int st_open(const char* path, st_file* f);
void st_close(st_file* f);

/* The tensor `name` if it exists with this dtype and shape [ndim] (NULL: any shape), else NULL
 * with a message printed. */
const void* st_get(const st_file* f, const char* name, st_dtype dtype, int ndim, const int64_t* shape);
/* The number of elements of tensor `name`, or -1 if it does not exist. */
int64_t st_numel(const st_file* f, const char* name);
/* The metadata value of `key` as an int / float; prints a message and returns 0 with *ok = 0
 * when it is missing or not a number (*ok is left alone on success). */
int st_meta_int(const st_file* f, const char* key, int* ok);
float st_meta_float(const st_file* f, const char* key, int* ok);
/* The metadata string of `key`, or NULL. */
const char* st_meta_str(const st_file* f, const char* key);

#endif /* TINY_SAFETENSORS_READ_H */
