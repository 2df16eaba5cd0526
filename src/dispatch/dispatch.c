#include "dispatch/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "dispatch/cpu_features.h"
#include "dispatch/isa_list.h"

/* Each ISA's table init (table_<name>.c, compiled with that ISA's flags). */
#define DECLARE_INIT(E, name, ...) void mh_kernels_init__##name(mh_kernels* k);
MH_ISA_LIST(DECLARE_INIT)

/* MH_IF_COMPILED(E, a, b) is `a` where cmake/kernels.cmake defined MH_HAVE_E=1 (the ISA's
 * kernels are built), else `b`; resolved by the preprocessor, so an ISA that is not compiled
 * leaves no reference to its init behind. */
#define MH_SECOND_(a, b, ...) b
#define MH_SECOND(...) MH_SECOND_(__VA_ARGS__)
#define MH_PROBE_1 ~, 1
#define MH_IS_ONE_(x) MH_SECOND(MH_PROBE_##x, 0, ~)
#define MH_IS_ONE(x) MH_IS_ONE_(x)
#define MH_PICK_1(a, b) a
#define MH_PICK_0(a, b) b
#define MH_PICK_(bit) MH_PICK_##bit
#define MH_PICK(bit) MH_PICK_(bit)
#define MH_IF_COMPILED(E, a, b) MH_PICK(MH_IS_ONE(MH_HAVE_##E))(a, b)

typedef void (*table_init)(mh_kernels* k);
#define INIT_ENTRY(E, name, ...) [MH_ISA_##E] = MH_IF_COMPILED(E, mh_kernels_init__##name, NULL),
static const table_init g_init[MH_ISA_COUNT] = {MH_ISA_LIST(INIT_ENTRY)};

#define NAME_ENTRY(E, name, ...) [MH_ISA_##E] = #name,
static const char* const g_names[MH_ISA_COUNT] = {[MH_ISA_AUTO] = "auto", MH_ISA_LIST(NAME_ENTRY)};

#define PRIORITY_ENTRY(E, name, arch, priority, ...) [MH_ISA_##E] = priority,
static const int g_priority[MH_ISA_COUNT] = {MH_ISA_LIST(PRIORITY_ENTRY)};

/* Filled once: every compiled-in table the CPU can run, indexed by mh_isa. A table's init is
 * compiled with its ISA's flags, so it is only called where that ISA runs (a CPU without AVX2
 * would fault in mh_kernels_init__avx2; the SVE init reads the vector length). */
static mh_kernels g_tables[MH_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_tables(void) {
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++)
        if (g_init[i] && mh_cpu_has_isa((mh_isa)i)) {
            g_init[i](&g_tables[i]);
            if (!g_tables[i].gemm_mr_bf16) g_tables[i].gemm_mr_bf16 = g_tables[i].gemm_mr;
            if (!g_tables[i].attn_group_kv_tile) g_tables[i].attn_group_kv_tile = g_tables[i].attn_kv_tile;
            if (!g_tables[i].bf16_gemm_name) g_tables[i].bf16_gemm_name = "dot";
            g_tables[i].l1d_bytes = mh_cpu_l1d_bytes();
            g_tables[i].l2_bytes = mh_cpu_l2_bytes();
            g_tables[i].decode_heads = mh_cpu_decode_heads();
        }
}

/* The AMX tile state, asked for once, by the process's first bf16 call. */
static pthread_once_t g_bf16_once = PTHREAD_ONCE_INIT;
static int g_amx;

static void init_bf16(void) {
    mh_kernels* k = &g_tables[MH_ISA_AVX512];
    if (!k->bf16_amx || !mh_cpu_request_amx()) return;
    k->bf16_amx(k);
    g_amx = 1;
}

int mh_dispatch_bf16_ready(void) {
    pthread_once(&g_once, init_tables);
    pthread_once(&g_bf16_once, init_bf16);
    return g_amx;
}

static int valid_isa(mh_isa isa) { return isa > MH_ISA_AUTO && isa < MH_ISA_COUNT; }

const char* mh_isa_name(mh_isa isa) {
    return (isa >= MH_ISA_AUTO && isa < MH_ISA_COUNT && g_names[isa]) ? g_names[isa] : "unknown";
}

int mh_isa_compiled(mh_isa isa) { return valid_isa(isa) && g_init[isa] != NULL; }

int mh_isa_supported(mh_isa isa) { return mh_isa_compiled(isa) && mh_cpu_has_isa(isa); }

const mh_kernels* mh_dispatch_table(mh_isa isa) {
    if (!mh_isa_supported(isa)) return NULL;
    pthread_once(&g_once, init_tables);
    return &g_tables[isa];
}

/* The supported ISA with the highest registry priority (scalar always qualifies). */
static mh_isa best_supported(void) {
    mh_isa best = MH_ISA_SCALAR;
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++)
        if (mh_isa_supported((mh_isa)i) && g_priority[i] > g_priority[best]) best = (mh_isa)i;
    return best;
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
