#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"

void* mh_alloc(size_t bytes) {
    size_t rounded;
    if (!mh_align_size(bytes ? bytes : 1, 64, &rounded)) return NULL;
    void* p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

void mh_free(void* p) { free(p); }
