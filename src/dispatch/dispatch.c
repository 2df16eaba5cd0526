#include "dispatch/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "dispatch/cpu_features.h"
#ifdef MH_HAVE_AVX2
#include "kernels/x86/avx2/kernels_avx2.h"
#endif
#ifdef MH_HAVE_AVX512
#include "kernels/x86/avx512/kernels_avx512.h"
#endif
#ifdef MH_HAVE_NEON
#include "kernels/arm/neon/kernels_neon.h"
#endif
#ifdef MH_HAVE_SVE
#include "kernels/arm/sve/kernels_sve.h"
#endif

/* Filled once: every compiled-in table the CPU can run, indexed by mh_isa. A table's init is
 * compiled with its ISA's flags, so it is only called where that ISA runs (a CPU without AVX2
 * would fault in mh_kernels_init_avx2). */
static mh_kernels g_tables[MH_ISA_COUNT];
static int g_compiled[MH_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_tables(void) {
    mh_kernels_init_scalar(&g_tables[MH_ISA_SCALAR]);
    g_compiled[MH_ISA_SCALAR] = 1;
#ifdef MH_HAVE_AVX2
    g_compiled[MH_ISA_AVX2] = 1;
    if (mh_cpu_has_isa(MH_ISA_AVX2)) mh_kernels_init_avx2(&g_tables[MH_ISA_AVX2]);
#endif
#ifdef MH_HAVE_AVX512
    g_compiled[MH_ISA_AVX512] = 1;
    if (mh_cpu_has_isa(MH_ISA_AVX512)) mh_kernels_init_avx512(&g_tables[MH_ISA_AVX512]);
#endif
#ifdef MH_HAVE_NEON
    g_compiled[MH_ISA_NEON] = 1;
    if (mh_cpu_has_isa(MH_ISA_NEON)) mh_kernels_init_neon(&g_tables[MH_ISA_NEON]);
#endif
#ifdef MH_HAVE_SVE
    g_compiled[MH_ISA_SVE] = 1;
    if (mh_cpu_has_isa(MH_ISA_SVE)) mh_kernels_init_sve(&g_tables[MH_ISA_SVE]);
#endif
}

static int valid_isa(mh_isa isa) { return isa > MH_ISA_AUTO && isa < MH_ISA_COUNT; }

const char* mh_isa_name(mh_isa isa) {
    static const char* const names[MH_ISA_COUNT] = {"auto", "scalar", "avx2", "avx512", "neon", "sve"};
    return (isa >= MH_ISA_AUTO && isa < MH_ISA_COUNT) ? names[isa] : "unknown";
}

int mh_isa_compiled(mh_isa isa) {
    pthread_once(&g_once, init_tables);
    return valid_isa(isa) && g_compiled[isa];
}

int mh_isa_supported(mh_isa isa) { return mh_isa_compiled(isa) && mh_cpu_has_isa(isa); }

const mh_kernels* mh_dispatch_table(mh_isa isa) {
    return mh_isa_supported(isa) ? &g_tables[isa] : NULL;
}

static mh_isa best_supported(void) {
    static const mh_isa order[] = {MH_ISA_AVX512, MH_ISA_AVX2, MH_ISA_SVE, MH_ISA_NEON};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (mh_isa_supported(order[i])) return order[i];
    return MH_ISA_SCALAR;
}

mh_status mh_isa_default(mh_isa* out) {
    if (!out) return MH_ERR_INVALID_ARGUMENT;
    const char* env = getenv("MH_ISA");
    const int debug = getenv("MH_ISA_DEBUG") && getenv("MH_ISA_DEBUG")[0] == '1';
    mh_isa isa = MH_ISA_AUTO;
    if (env && strcasecmp(env, "auto") == 0) env = NULL; /* the same as unset */
    if (env && env[0]) {
        for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++)
            if (strcasecmp(env, mh_isa_name((mh_isa)i)) == 0) isa = (mh_isa)i;
        if (isa == MH_ISA_AUTO) {
            if (debug) fprintf(stderr, "multihead: MH_ISA=%s names no ISA\n", env);
            return MH_ERR_INVALID_ARGUMENT;
        }
        if (!mh_isa_supported(isa)) {
            if (debug)
                fprintf(stderr, "multihead: MH_ISA=%s is %s\n", env,
                        mh_isa_compiled(isa) ? "not supported by this CPU" : "not compiled in");
            return MH_ERR_ISA_UNAVAILABLE;
        }
    } else {
        isa = best_supported();
    }
    if (debug)
        fprintf(stderr, "multihead: selecting ISA '%s'%s\n", mh_isa_name(isa),
                env && env[0] ? " (from MH_ISA)" : "");
    *out = isa;
    return MH_OK;
}
