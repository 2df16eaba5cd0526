/*
 * The safetensors reader (safetensors_read.h): a recursive-descent walk over the JSON header
 * that accepts exactly the shapes the format uses (objects, strings, integer arrays), and
 * checks every tensor's offsets against its dtype, shape and the data section.
 */
#include "safetensors_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cursor over the header text; `bad` is set by the first syntax error. */
typedef struct json {
    const char *p, *end;
    int bad;
} json;

static void skip_ws(json* j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int expect(json* j, char c) {
    skip_ws(j);
    if (j->p < j->end && *j->p == c) return j->p++, 1;
    j->bad = 1;
    return 0;
}

static int peek(json* j, char c) {
    skip_ws(j);
    return j->p < j->end && *j->p == c;
}

/* A string into out[cap] (NUL-terminated; \" and \\ escapes only; too long is an error). */
static void string(json* j, char* out, size_t cap) {
    size_t n = 0;
    if (!expect(j, '"')) return;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\') {
            if (j->p >= j->end || (*j->p != '"' && *j->p != '\\')) break;
            c = *j->p++;
        }
        if (n + 1 >= cap) break;
        out[n++] = c;
    }
    out[n] = 0;
    if (!expect(j, '"')) j->bad = 1;
}

static int64_t integer(json* j) {
    skip_ws(j);
    int64_t v = 0;
    const char* start = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9' && v < INT64_MAX / 16) v = v * 10 + (*j->p++ - '0');
    if (j->p == start || (j->p < j->end && *j->p >= '0' && *j->p <= '9')) j->bad = 1;
    return v;
}

/* [i, i, ...] into out[cap]; returns the count. */
static int int_array(json* j, int64_t* out, int cap) {
    int n = 0;
    if (!expect(j, '[')) return 0;
    if (peek(j, ']')) return j->p++, 0;
    do {
        const int64_t v = integer(j);
        if (n < cap) out[n] = v;
        n++;
    } while (!j->bad && peek(j, ',') && j->p++);
    expect(j, ']');
    if (n > cap) j->bad = 1;
    return n;
}

/* {"key": "value", ...} of the metadata. */
static void metadata(json* j, st_file* f, int cap) {
    expect(j, '{');
    if (peek(j, '}')) {
        j->p++;
        return;
    }
    do {
        st_meta m;
        string(j, m.key, sizeof m.key);
        expect(j, ':');
        string(j, m.value, sizeof m.value);
        if (f->n_meta < cap) f->meta[f->n_meta++] = m;
        else j->bad = 1;
    } while (!j->bad && peek(j, ',') && j->p++);
    expect(j, '}');
}

/* One tensor's {"dtype", "shape", "data_offsets"}; offsets go to off[2]. */
static void tensor(json* j, st_tensor* t, int64_t* off) {
    char key[32], dtype[8] = "";
    int have = 0;
    expect(j, '{');
    do {
        string(j, key, sizeof key);
        expect(j, ':');
        if (!strcmp(key, "dtype")) string(j, dtype, sizeof dtype), have |= 1;
        else if (!strcmp(key, "shape")) t->ndim = int_array(j, t->shape, ST_MAX_DIMS), have |= 2;
        else if (!strcmp(key, "data_offsets")) have |= int_array(j, off, 2) == 2 ? 4 : 0;
        else j->bad = 1;
    } while (!j->bad && peek(j, ',') && j->p++);
    expect(j, '}');
    if (!strcmp(dtype, "F32")) t->dtype = ST_F32;
    else if (!strcmp(dtype, "I32")) t->dtype = ST_I32;
    else j->bad = 1;
    if (have != 7) j->bad = 1;
}

/* Parses the header and points every tensor into the data section [size bytes]. */
static int parse(const char* text, size_t len, size_t size, st_file* f) {
    json j = {text, text + len, 0};
    int cap = 0;
    for (size_t i = 0; i < len; i++) cap += text[i] == '{'; /* an upper bound of both counts */
    f->tensors = calloc((size_t)cap + 1, sizeof *f->tensors);
    f->meta = calloc((size_t)cap + 1, sizeof *f->meta);
    if (!f->tensors || !f->meta) return -1;
    expect(&j, '{');
    if (peek(&j, '}')) j.p++;
    else do {
        char name[64];
        string(&j, name, sizeof name);
        expect(&j, ':');
        if (!strcmp(name, "__metadata__")) {
            metadata(&j, f, cap);
            continue;
        }
        st_tensor* t = &f->tensors[f->n_tensors++];
        int64_t off[2] = {0, 0}, bytes = 4;
        snprintf(t->name, sizeof t->name, "%s", name);
        tensor(&j, t, off);
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] > 0 && bytes > INT64_MAX / t->shape[d]) j.bad = 1;
            else bytes *= t->shape[d];
        }
        if (off[0] % 4 || off[1] - off[0] != bytes || off[1] > (int64_t)size) j.bad = 1;
        t->data = (const char*)f->blob + off[0];
    } while (!j.bad && peek(&j, ',') && j.p++);
    expect(&j, '}');
    skip_ws(&j);
    return j.bad || j.p != j.end ? -1 : 0;
}

int st_open(const char* path, st_file* f) {
    memset(f, 0, sizeof *f);
    FILE* fp = fopen(path, "rb");
    if (!fp) return printf("FAIL: cannot open %s (run gen_tiny_decoder.py first)\n", path), -1;
    unsigned char len8[8];
    uint64_t hlen = 0;
    char* header = NULL;
    int rc = -1;
    long total = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    rewind(fp);
    if (total >= 8 && fread(len8, 1, 8, fp) == 8) {
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
        const uint64_t size = hlen <= (uint64_t)total - 8 ? (uint64_t)total - 8 - hlen : 0;
        header = hlen <= (uint64_t)total - 8 ? malloc(hlen + 1) : NULL;
        f->blob = header ? malloc(size ? size : 1) : NULL;
        if (f->blob && fread(header, 1, hlen, fp) == hlen && fread(f->blob, 1, size, fp) == size)
            rc = parse(header, hlen, size, f);
    }
    free(header);
    fclose(fp);
    if (rc) {
        printf("FAIL: %s is not a safetensors file this reader understands\n", path);
        st_close(f);
    }
    return rc;
}

void st_close(st_file* f) {
    free(f->tensors);
    free(f->meta);
    free(f->blob);
    memset(f, 0, sizeof *f);
}

static const st_tensor* find(const st_file* f, const char* name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const void* st_get(const st_file* f, const char* name, st_dtype dtype, int ndim, const int64_t* shape) {
    const st_tensor* t = find(f, name);
    int ok = t && t->dtype == dtype;
    if (ok && shape) {
        ok = t->ndim == ndim;
        for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
    }
    if (!ok) printf("FAIL: tensor %s: %s\n", name, t ? "other dtype or shape than expected" : "missing");
    return ok ? t->data : NULL;
}

int64_t st_numel(const st_file* f, const char* name) {
    const st_tensor* t = find(f, name);
    int64_t n = t ? 1 : -1;
    for (int d = 0; t && d < t->ndim; d++) n *= t->shape[d];
    return n;
}

const char* st_meta_str(const st_file* f, const char* key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}

static double meta_number(const st_file* f, const char* key, int* ok) {
    const char* s = st_meta_str(f, key);
    char* end = NULL;
    const double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end) {
        printf("FAIL: metadata %s: %s\n", key, s ? "not a number" : "missing");
        *ok = 0;
        return 0;
    }
    return v;
}

int st_meta_int(const st_file* f, const char* key, int* ok) { return (int)meta_number(f, key, ok); }
float st_meta_float(const st_file* f, const char* key, int* ok) { return (float)meta_number(f, key, ok); }
