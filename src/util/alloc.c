#define _DEFAULT_SOURCE /* madvise */
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "util/checked.h"

/* Large blocks (KV caches, packed weights) are read as many far-apart streams; on Linux they
 * are aligned to 2 MiB and offered to transparent huge pages, so those streams do not miss the
 * TLB on every page (THP in "madvise" mode only backs blocks that ask). */
#define HUGE_BLOCK ((size_t)2 << 20)

void* mh_alloc(size_t bytes) {
    size_t rounded;
    const int huge = bytes >= HUGE_BLOCK;
    if (!mh_align_size(bytes ? bytes : 1, huge ? HUGE_BLOCK : 64, &rounded)) return NULL;
    void* p = aligned_alloc(huge ? HUGE_BLOCK : 64, rounded);
    if (!p) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    memset(p, 0, rounded);
    return p;
}

void mh_free(void* p) { free(p); }
