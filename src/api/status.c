/* Version and status strings. */
#include "multihead.h"

#define MH_STR2(x) #x
#define MH_STR(x) MH_STR2(x)

unsigned mh_version_number(void) { return MH_VERSION_NUMBER; }

const char* mh_version_string(void) {
    return MH_STR(MH_VERSION_MAJOR) "." MH_STR(MH_VERSION_MINOR) "." MH_STR(MH_VERSION_PATCH);
}

const char* mh_status_string(mh_status status) {
    switch (status) {
    case MH_OK: return "ok";
    case MH_ERR_INVALID_ARGUMENT: return "invalid argument";
    case MH_ERR_UNSUPPORTED: return "unsupported";
    case MH_ERR_OUT_OF_MEMORY: return "out of memory";
    case MH_ERR_SIZE_OVERFLOW: return "size overflow";
    case MH_ERR_WORKSPACE_TOO_SMALL: return "workspace too small";
    case MH_ERR_CACHE_FULL: return "KV cache full";
    case MH_ERR_SHAPE_MISMATCH: return "shape mismatch";
    case MH_ERR_ISA_UNAVAILABLE: return "ISA unavailable";
    }
    return "unknown status";
}
