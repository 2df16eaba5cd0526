/*
 * Carving a caller-provided workspace into aligned buffers. The same carving code runs twice:
 * once with base == NULL to measure the size (the *_workspace_size functions), once on the
 * real buffer, so the reported size and the real layout cannot drift apart.
 */
#ifndef MH_UTIL_WORKSPACE_H
#define MH_UTIL_WORKSPACE_H
#include <stddef.h>

#include "util/checked.h"

#define MH_WS_ALIGN 64

typedef struct mh_ws {
    unsigned char* base; /* NULL while measuring */
    size_t used;         /* bytes carved so far */
    int overflow;        /* set once a size overflowed; every later take returns NULL */
} mh_ws;

static inline mh_ws mh_ws_begin(void* base) {
    mh_ws ws = {(unsigned char*)base, 0, 0};
    return ws;
}

/* Carves rows * cols * elem_size bytes, 64-byte aligned, every product checked.
 * Returns NULL while measuring or after an overflow (which sticks). */
static inline void* mh_ws_take(mh_ws* ws, size_t rows, size_t cols, size_t elem_size) {
    size_t bytes, start, end;
    if (ws->overflow || !mh_mul3_size(rows, cols, elem_size, &bytes) ||
        !mh_align_size(ws->used, MH_WS_ALIGN, &start) || !mh_add_size(start, bytes, &end)) {
        ws->overflow = 1;
        return NULL;
    }
    ws->used = end;
    return ws->base ? ws->base + start : NULL;
}

#endif
