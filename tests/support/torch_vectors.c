/* Reader of the PyTorch reference-vector files (format in torch_vectors.h). */
#include "torch_vectors.h"

#include "check.h"
#include "multihead.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t le32(const unsigned char* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void tv_free(tv_file* f) {
    for (int i = 0; i < f->n; i++) free(f->e[i].data);
    f->n = 0;
}

/* Reads the next little-endian uint32; 0 if the buffer is exhausted. */
static int take_u32(const unsigned char* buf, size_t len, size_t* off, uint32_t* v) {
    if (len - *off < 4) return 0;
    *v = le32(buf + *off);
    *off += 4;
    return 1;
}

static int tv_parse_entry(tv_entry* e, const unsigned char* buf, size_t len, size_t* off) {
    uint32_t nl, dt, nd;
    if (!take_u32(buf, len, off, &nl) || nl == 0 || nl >= MAX_NAME || len - *off < nl) return 0;
    memcpy(e->name, buf + *off, nl);
    e->name[nl] = '\0';
    *off += nl;
    if (!take_u32(buf, len, off, &dt) || !take_u32(buf, len, off, &nd) || dt > 1 || nd > 4)
        return 0;
    e->dtype = (int)dt;
    e->ndim = (int)nd;
    e->count = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint32_t v;
        if (!take_u32(buf, len, off, &v) || v == 0 || v > (1u << 20)) return 0;
        e->dims[d] = (int)v;
        e->count *= v;
    }
    if (e->count > (1u << 24) || (len - *off) / 4 < e->count) return 0;
    e->data = malloc(4 * e->count);
    if (!e->data) return 0;
    for (size_t i = 0; i < e->count; i++) {
        uint32_t u = le32(buf + *off + 4 * i);
        if (dt == 0) memcpy((float*)e->data + i, &u, 4); /* IEEE binary32 bits */
        else ((int32_t*)e->data)[i] = (int32_t)u;
    }
    *off += 4 * e->count;
    return 1;
}

static int tv_parse(tv_file* f, const unsigned char* buf, size_t len, size_t* off) {
    uint32_t n;
    if (len < 8 || memcmp(buf, "MHTVEC01", 8) != 0) return 0;
    *off = 8;
    if (!take_u32(buf, len, off, &n) || n > MAX_ENTRIES) return 0;
    for (uint32_t k = 0; k < n; k++) {
        if (!tv_parse_entry(&f->e[f->n], buf, len, off)) {
            free(f->e[f->n].data);
            f->e[f->n].data = NULL;
            return 0;
        }
        f->n++;
    }
    return *off == len;
}

/* Returns 1 on success; prints why otherwise. */
int tv_load(tv_file* f, const char* dir, const char* name) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    FILE* fp = fopen(f->path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open %s (run the generator in tests/data)\n", f->path);
        return 0;
    }
    unsigned char* buf = NULL;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size > 0 && fseek(fp, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)size);
        if (buf && fread(buf, 1, (size_t)size, fp) != (size_t)size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(fp);
    if (!buf) {
        fprintf(stderr, "cannot read %s\n", f->path);
        return 0;
    }
    size_t off = 0;
    int ok = tv_parse(f, buf, (size_t)size, &off);
    free(buf);
    if (!ok) {
        fprintf(stderr, "%s: malformed test vector file (near byte %zu)\n", f->path, off);
        tv_free(f);
    }
    return ok;
}

const tv_entry* tv_find(const tv_file* f, const char* name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
    return NULL;
}

/* An int32 scalar; clears *ok and returns -1 if absent. */
int tv_int(const tv_file* f, const char* name, int* ok) {
    const tv_entry* e = tv_find(f, name);
    if (!e || e->dtype != 1 || e->ndim != 0) {
        fprintf(stderr, "%s: missing int32 scalar '%s'\n", f->path, name);
        *ok = 0;
        return -1;
    }
    return ((const int32_t*)e->data)[0];
}

/* A tensor of the given dtype and shape; NULL (and *ok cleared) if absent or shaped otherwise. */
const void* tv_tensor(const tv_file* f, const char* name, int dtype, int ndim,
                             const int* dims, int* ok) {
    const tv_entry* e = tv_find(f, name);
    int good = e && e->dtype == dtype && e->ndim == ndim;
    for (int d = 0; good && d < ndim; d++) good = e->dims[d] == dims[d];
    if (!good) {
        fprintf(stderr, "%s: missing or misshaped tensor '%s'\n", f->path, name);
        *ok = 0;
        return NULL;
    }
    return e->data;
}

const float* tv_f32(const tv_file* f, const char* name, int ndim, int d0, int d1, int d2,
                           int d3, int* ok) {
    int dims[4] = {d0, d1, d2, d3};
    return (const float*)tv_tensor(f, name, 0, ndim, dims, ok);
}

void tv_layer_weights(const tv_file* f, int d, int kdim, int vdim, int H, int Hkv, int D, int bias,
                      mh_layer_weights* w, int* ok) {
    w->w_q = tv_f32(f, "w_q", 2, H * D, d, 0, 0, ok);
    w->w_k = tv_f32(f, "w_k", 2, Hkv * D, kdim, 0, 0, ok);
    w->w_v = tv_f32(f, "w_v", 2, Hkv * D, vdim, 0, 0, ok);
    w->w_o = tv_f32(f, "w_o", 2, d, H * D, 0, 0, ok);
    if (!bias) return;
    w->b_q = tv_f32(f, "b_q", 1, H * D, 0, 0, 0, ok);
    w->b_k = tv_f32(f, "b_k", 1, Hkv * D, 0, 0, 0, ok);
    w->b_v = tv_f32(f, "b_v", 1, Hkv * D, 0, 0, 0, ok);
    w->b_o = tv_f32(f, "b_o", 1, d, 0, 0, 0, ok);
}

int tv_run_files(const char* test, const char* const* names, size_t n,
                 void (*fn)(const tv_file* f, const char* name)) {
    mh_isa isa;
    if (mh_isa_default(&isa) == MH_ERR_ISA_UNAVAILABLE) return 77; /* MH_ISA: not on this machine */
    const char* dir = getenv("MH_TEST_DATA");
    if (!check_true("MH_TEST_DATA is set (the tests/data directory)", dir && *dir))
        return test_exit_code(test);
    for (size_t k = 0; k < n; k++) {
        tv_file* f = malloc(sizeof *f);
        char what[1200];
        snprintf(what, sizeof what, "load %s/%s", dir, names[k]);
        if (check_true(what, f && tv_load(f, dir, names[k]))) {
            fn(f, names[k]);
            tv_free(f);
        }
        free(f);
    }
    return test_exit_code(test);
}
