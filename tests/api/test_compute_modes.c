#define _POSIX_C_SOURCE 200809L /* setenv */
/*
 * Compute modes (docs/api.md, "Compute modes") on every ISA this CPU runs: F32 everywhere;
 * BF16 where mh_compute_supported says so (AVX512 with AVX512-BF16, NEON with FEAT_BF16, SVE
 * with SVE BF16, the scalar reference) and refused with MH_ERR_ISA_UNAVAILABLE elsewhere, at
 * context create, layer create and per call, writing nothing; F16 refused everywhere (no
 * kernels yet); bad values MH_ERR_INVALID_ARGUMENT; MH_COMPUTE as the context's default.
 * mh_compute_kernels names what multiplies each mode: "f32" for F32 and the scalar BF16,
 * "dot" on Arm, and on AVX-512 "amx" exactly where Linux lists amx_bf16 in /proc/cpuinfo (the
 * CPU has it and the kernel enables it) and MH_BF16_GEMM does not force dot or fma.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "problem.h"

static mh_context* const UNTOUCHED = (mh_context*)(uintptr_t)0x1;

/* mh_attention with opt.compute = c on ctx: the status, and o untouched unless MH_OK. */
static void call_with(const mh_context* ctx, mh_compute c, mh_status want, const char* what) {
    test_rng r;
    rng_seed(&r, 3);
    test_problem t;
    problem_make(&t, &r, 1, 9, 20, 2, 1, 16, 16, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    mh_attn_options opt = mh_attn_options_default();
    opt.compute = c;
    size_t bytes = 0;
    check_status(what, mh_attention_workspace_size(ctx, &t.p, &opt, &bytes), want);
    memset(t.o, 0x7f, t.o_elems * sizeof(float));
    void* ws = aligned_alloc(64, 1 << 20);
    check_status(what, mh_attention(ctx, &t.p, &opt, ws, 1 << 20), want);
    if (want != MH_OK) check_true(what, all_bytes(t.o, t.o_elems * sizeof(float), 0x7f));
    free(ws);
    problem_free(&t);
}

/* 1 if /proc/cpuinfo's flags hold `flag` (0 where it cannot be read). */
static int cpuinfo_has(const char* flag) {
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0)
            for (char* t = strtok(line, " \t\n"); t && !found; t = strtok(NULL, " \t\n")) found = strcmp(t, flag) == 0;
    fclose(f);
    return found;
}

/* What mh_compute_kernels says of isa's modes, against the oracle in the header. */
static void kernels_named(mh_isa isa, int bf16) {
    char what[160];
    const char* f32 = mh_compute_kernels(isa, MH_COMPUTE_F32);
    const char* b = mh_compute_kernels(isa, MH_COMPUTE_BF16);
    snprintf(what, sizeof what, "%s: kernels f32 %s, bf16 %s", mh_isa_name(isa), f32 ? f32 : "NULL", b ? b : "NULL");
    printf("%s\n", what);
    check_true(what, f32 && strcmp(f32, "f32") == 0 && !mh_compute_kernels(isa, MH_COMPUTE_F16) &&
                         !mh_compute_kernels(isa, (mh_compute)9));
    if (!bf16) {
        check_true(what, b == NULL);
        return;
    }
    const char* env = getenv("MH_BF16_GEMM");
    const int forced = env && (strcmp(env, "dot") == 0 || strcmp(env, "fma") == 0);
    const char* want = isa == MH_ISA_SCALAR                                   ? "f32"
                       : isa != MH_ISA_AVX512                                 ? "dot"
                       : !forced && cpuinfo_has("amx_bf16") && cpuinfo_has("amx_tile") ? "amx"
                       : forced                                               ? env
                                                                              : NULL; /* dot or fma: the vendor's */
    check_true(what, b && (want ? strcmp(b, want) == 0 : strcmp(b, "dot") == 0 || strcmp(b, "fma") == 0));
}

static void one_isa(mh_isa isa) {
    char what[160];
    const int bf16 = mh_compute_supported(isa, MH_COMPUTE_BF16);
    const mh_status want = bf16 ? MH_OK : MH_ERR_ISA_UNAVAILABLE;
    printf("%-7s f32 %d bf16 %d f16 %d\n", mh_isa_name(isa), mh_compute_supported(isa, MH_COMPUTE_F32), bf16,
           mh_compute_supported(isa, MH_COMPUTE_F16));
    snprintf(what, sizeof what, "%s: f32 supported, f16 not", mh_isa_name(isa));
    check_true(what, mh_compute_supported(isa, MH_COMPUTE_F32) && !mh_compute_supported(isa, MH_COMPUTE_F16));
    if (isa == MH_ISA_SCALAR) check_true("scalar: the bf16 reference", bf16);
    if (isa == MH_ISA_AVX2) check_true("avx2: no bf16", !bf16);
    kernels_named(isa, bf16);
    /* context create */
    mh_context_config cc = mh_context_config_default();
    cc.isa = isa, cc.num_threads = 1;
    mh_context* ctx = UNTOUCHED;
    cc.compute = MH_COMPUTE_BF16;
    snprintf(what, sizeof what, "%s: bf16 context", mh_isa_name(isa));
    check_status(what, mh_context_create(&cc, &ctx), want);
    check_true(what, bf16 ? ctx != UNTOUCHED && mh_context_compute(ctx) == MH_COMPUTE_BF16 : ctx == UNTOUCHED);
    if (bf16) mh_context_destroy(ctx);
    ctx = UNTOUCHED;
    cc.compute = MH_COMPUTE_F16;
    snprintf(what, sizeof what, "%s: f16 context refused", mh_isa_name(isa));
    check_status(what, mh_context_create(&cc, &ctx), MH_ERR_ISA_UNAVAILABLE);
    check_true(what, ctx == UNTOUCHED);
    cc.compute = (mh_compute)9;
    check_status("compute 9", mh_context_create(&cc, &ctx), MH_ERR_INVALID_ARGUMENT);
    /* layer create and per call, on an f32 context */
    cc.compute = MH_COMPUTE_F32;
    check_status("f32 context", mh_context_create(&cc, &ctx), MH_OK);
    check_true("f32 context", mh_context_compute(ctx) == MH_COMPUTE_F32);
    float w[8 * 8] = {0};
    mh_layer_weights lw = {0};
    lw.w_q = lw.w_k = lw.w_v = lw.w_o = w;
    mh_layer_config lc = mh_layer_config_default();
    lc.d_model = 8, lc.n_heads = 2, lc.head_dim = 4, lc.compute = MH_COMPUTE_BF16;
    mh_layer* L = (mh_layer*)(uintptr_t)0x1;
    snprintf(what, sizeof what, "%s: bf16 layer", mh_isa_name(isa));
    check_status(what, mh_layer_create(ctx, &lc, &lw, &L), want);
    check_true(what, bf16 ? L != (mh_layer*)(uintptr_t)0x1 : L == (mh_layer*)(uintptr_t)0x1);
    if (bf16) mh_layer_destroy(L);
    snprintf(what, sizeof what, "%s: bf16 call", mh_isa_name(isa));
    call_with(ctx, MH_COMPUTE_BF16, want, what);
    snprintf(what, sizeof what, "%s: f16 call refused", mh_isa_name(isa));
    call_with(ctx, MH_COMPUTE_F16, MH_ERR_ISA_UNAVAILABLE, what);
    call_with(ctx, (mh_compute)-1, MH_ERR_INVALID_ARGUMENT, "compute -1");
    mh_context_destroy(ctx);
}

int main(void) {
    check_true("names", strcmp(mh_compute_name(MH_COMPUTE_BF16), "bf16") == 0 &&
                            strcmp(mh_compute_name(MH_COMPUTE_DEFAULT), "default") == 0 &&
                            strcmp(mh_compute_name((mh_compute)42), "unknown") == 0);
    int refused = 0;
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++) {
        if (!mh_isa_supported((mh_isa)i)) {
            check_true("an unsupported ISA runs no mode", !mh_compute_supported((mh_isa)i, MH_COMPUTE_F32) &&
                                                            !mh_compute_supported((mh_isa)i, MH_COMPUTE_BF16) &&
                                                            !mh_compute_kernels((mh_isa)i, MH_COMPUTE_F32));
            continue;
        }
        refused += !mh_compute_supported((mh_isa)i, MH_COMPUTE_BF16);
        one_isa((mh_isa)i);
    }
    printf("%d ISA(s) here refuse bf16\n", refused);
    /* MH_COMPUTE: the context's default */
    mh_context_config cc = mh_context_config_default();
    mh_context* ctx = NULL;
    setenv("MH_COMPUTE", "nonsense", 1);
    check_status("MH_COMPUTE=nonsense", mh_context_create(&cc, &ctx), MH_ERR_INVALID_ARGUMENT);
    setenv("MH_COMPUTE", "f16", 1);
    check_status("MH_COMPUTE=f16", mh_context_create(&cc, &ctx), MH_ERR_ISA_UNAVAILABLE);
    setenv("MH_COMPUTE", "bf16", 1);
    mh_isa isa;
    check_status("default ISA", mh_isa_default(&isa), MH_OK);
    const int bf16 = mh_compute_supported(isa, MH_COMPUTE_BF16);
    check_status("MH_COMPUTE=bf16", mh_context_create(&cc, &ctx), bf16 ? MH_OK : MH_ERR_ISA_UNAVAILABLE);
    if (bf16) check_true("MH_COMPUTE=bf16", mh_context_compute(ctx) == MH_COMPUTE_BF16);
    mh_context_destroy(ctx);
    unsetenv("MH_COMPUTE");
    return test_exit_code("test_compute_modes");
}
