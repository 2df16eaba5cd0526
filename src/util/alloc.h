/* Aligned allocation for everything a create function owns. */
#ifndef MH_UTIL_ALLOC_H
#define MH_UTIL_ALLOC_H
#include <stddef.h>

/* 64-byte aligned, zero-filled; NULL on failure or bytes == 0 overflow. */
void* mh_alloc(size_t bytes);
void mh_free(void* p);

#endif
