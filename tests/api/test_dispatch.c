/*
 * The dispatcher under a given MH_ISA environment variable (ctest sets it per test).
 *
 *   test_dispatch --expect ISA   mh_isa_default() and an MH_ISA_AUTO context both give ISA.
 *                                If ISA is not supported on this CPU (or not compiled in), the
 *                                program checks that MH_ISA=ISA is refused with
 *                                MH_ERR_ISA_UNAVAILABLE and exits 77 (skipped).
 *   test_dispatch --expect-error MH_ISA names no ISA: mh_isa_default() and an MH_ISA_AUTO
 *                                context fail with MH_ERR_INVALID_ARGUMENT and write nothing.
 *
 *   test_dispatch                (no argument) whatever MH_ISA holds, the default agrees with it:
 *                                unset/empty -> the best supported ISA (never scalar while a
 *                                SIMD ISA is supported), a supported ISA -> that one, an
 *                                unsupported one -> MH_ERR_ISA_UNAVAILABLE, no ISA at all ->
 *                                MH_ERR_INVALID_ARGUMENT.
 *
 * In every mode, forcing each ISA through mh_context_config.isa ignores MH_ISA: supported
 * ISAs give exactly that ISA, unsupported ones MH_ERR_ISA_UNAVAILABLE (never a fallback),
 * out-of-range values MH_ERR_INVALID_ARGUMENT.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "multihead.h"

#define SKIP_CODE 77

/* ASCII case-insensitive equality (strcasecmp is POSIX, not C11). */
static int same_name(const char* a, const char* b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

/* The ISA named `name` (any case), or MH_ISA_AUTO if it names none. */
static mh_isa isa_by_name(const char* name) {
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++)
        if (same_name(name, mh_isa_name((mh_isa)i))) return (mh_isa)i;
    return MH_ISA_AUTO;
}

/* A context with an explicit thread count so the checks do not depend on the machine. */
static mh_status create(mh_isa isa, mh_context** out) {
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = 1;
    cc.isa = isa;
    return mh_context_create(&cc, out);
}

/* A value no create may write: failed calls must leave *out alone. */
static mh_context* sentinel(void) {
    static int marker;
    return (mh_context*)(void*)&marker;
}

static void check_forced_isas(void) {
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++) {
        const mh_isa isa = (mh_isa)i;
        char what[128];
        mh_context* ctx = sentinel();
        const mh_status st = create(isa, &ctx);
        if (mh_isa_supported(isa)) {
            snprintf(what, sizeof what, "forced %s (supported): create", mh_isa_name(isa));
            check_status(what, st, MH_OK);
            if (st == MH_OK) {
                snprintf(what, sizeof what, "forced %s: context reports it", mh_isa_name(isa));
                check_true(what, ctx != sentinel() && ctx != NULL && mh_context_isa(ctx) == isa);
                if (ctx != sentinel() && ctx) {
                    snprintf(what, sizeof what, "forced %s: thread count kept", mh_isa_name(isa));
                    check_true(what, mh_context_num_threads(ctx) == 1);
                }
                if (ctx != sentinel()) mh_context_destroy(ctx);
            }
        } else {
            snprintf(what, sizeof what, "forced %s (%s): MH_ERR_ISA_UNAVAILABLE", mh_isa_name(isa),
                     mh_isa_compiled(isa) ? "not on this CPU" : "not compiled in");
            check_status(what, st, MH_ERR_ISA_UNAVAILABLE);
            snprintf(what, sizeof what, "forced %s (unavailable): out untouched", mh_isa_name(isa));
            check_true(what, ctx == sentinel());
            if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);
        }
    }
#if defined(__x86_64__) || defined(__i386__)
    {
        mh_context* ctx = sentinel();
        check_status("x86: forced neon is unavailable", create(MH_ISA_NEON, &ctx), MH_ERR_ISA_UNAVAILABLE);
        check_true("x86: forced neon: out untouched", ctx == sentinel());
        ctx = sentinel();
        check_status("x86: forced sve is unavailable", create(MH_ISA_SVE, &ctx), MH_ERR_ISA_UNAVAILABLE);
        check_true("x86: forced sve: out untouched", ctx == sentinel());
    }
#elif defined(__aarch64__)
    {
        mh_context* ctx = sentinel();
        check_status("arm64: forced avx2 is unavailable", create(MH_ISA_AVX2, &ctx), MH_ERR_ISA_UNAVAILABLE);
        check_true("arm64: forced avx2: out untouched", ctx == sentinel());
    }
#endif
    const int bad[] = {MH_ISA_COUNT, MH_ISA_COUNT + 1, 99, INT_MAX, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[128];
        mh_context* ctx = sentinel();
        const mh_status st = create((mh_isa)bad[i], &ctx);
        snprintf(what, sizeof what, "forced out-of-range isa %d: MH_ERR_INVALID_ARGUMENT", bad[i]);
        check_status(what, st, MH_ERR_INVALID_ARGUMENT);
        snprintf(what, sizeof what, "forced out-of-range isa %d: out untouched", bad[i]);
        check_true(what, ctx == sentinel());
        if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);
    }
}

static int run_expect(const char* name) {
    const mh_isa want = isa_by_name(name);
    if (want == MH_ISA_AUTO) {
        fprintf(stderr, "test_dispatch: --expect %s names no ISA\n", name);
        return 2;
    }
    const char* env = getenv("MH_ISA");
    const int env_names_it = env && env[0] && isa_by_name(env) == want;
    printf("test_dispatch: expecting %s (MH_ISA=%s)\n", mh_isa_name(want), env ? env : "(unset)");
    check_forced_isas();

    if (!mh_isa_supported(want)) {
        /* MH_ISA names a real ISA this machine cannot run: refused, never a fallback. */
        if (env_names_it) {
            mh_isa got = (mh_isa)-1;
            check_status("default with MH_ISA unavailable: MH_ERR_ISA_UNAVAILABLE",
                         mh_isa_default(&got), MH_ERR_ISA_UNAVAILABLE);
            check_true("default with MH_ISA unavailable: out untouched", got == (mh_isa)-1);
            mh_context* ctx = sentinel();
            const mh_status st = create(MH_ISA_AUTO, &ctx);
            check_status("auto context with MH_ISA unavailable: MH_ERR_ISA_UNAVAILABLE", st,
                         MH_ERR_ISA_UNAVAILABLE);
            check_true("auto context with MH_ISA unavailable: out untouched", ctx == sentinel());
            if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);
        }
        if (test_failures()) return test_exit_code("test_dispatch");
        printf("test_dispatch: %s is %s; skipped\n", mh_isa_name(want),
               mh_isa_compiled(want) ? "not supported by this CPU" : "not compiled in");
        return SKIP_CODE;
    }

    mh_isa got = MH_ISA_AUTO;
    const mh_status st = mh_isa_default(&got);
    check_status("mh_isa_default", st, MH_OK);
    if (st == MH_OK) {
        if (!check_true("mh_isa_default gives the expected ISA", got == want))
            fprintf(stderr, "  got %s, want %s\n", mh_isa_name(got), mh_isa_name(want));
    }
    mh_context* ctx = NULL;
    const mh_status cst = create(MH_ISA_AUTO, &ctx);
    check_status("auto context: create", cst, MH_OK);
    if (cst == MH_OK && ctx) {
        if (!check_true("auto context reports the expected ISA", mh_context_isa(ctx) == want))
            fprintf(stderr, "  got %s, want %s\n", mh_isa_name(mh_context_isa(ctx)), mh_isa_name(want));
        mh_context_destroy(ctx);
    }
    /* The default config (num_threads 0) too. */
    mh_context_config cc = mh_context_config_default();
    ctx = NULL;
    check_status("default-config context: create", mh_context_create(&cc, &ctx), MH_OK);
    if (ctx) {
        check_true("default-config context reports the expected ISA", mh_context_isa(ctx) == want);
        mh_context_destroy(ctx);
    }
    return test_exit_code("test_dispatch");
}

static int run_expect_error(void) {
    const char* env = getenv("MH_ISA");
    printf("test_dispatch: expecting an error (MH_ISA=%s)\n", env ? env : "(unset)");
    if (!check_true("MH_ISA is set and names no ISA", env && env[0] && isa_by_name(env) == MH_ISA_AUTO))
        fprintf(stderr, "  run this mode with MH_ISA set to a string that names no ISA\n");
    check_forced_isas();

    mh_isa got = (mh_isa)-1;
    check_status("mh_isa_default with a bad MH_ISA", mh_isa_default(&got), MH_ERR_INVALID_ARGUMENT);
    check_true("mh_isa_default with a bad MH_ISA: out untouched", got == (mh_isa)-1);

    mh_context* ctx = sentinel();
    mh_status st = create(MH_ISA_AUTO, &ctx);
    check_status("auto context with a bad MH_ISA", st, MH_ERR_INVALID_ARGUMENT);
    check_true("auto context with a bad MH_ISA: out untouched", ctx == sentinel());
    if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);

    mh_context_config cc = mh_context_config_default();
    ctx = sentinel();
    st = mh_context_create(&cc, &ctx);
    check_status("default-config context with a bad MH_ISA", st, MH_ERR_INVALID_ARGUMENT);
    check_true("default-config context with a bad MH_ISA: out untouched", ctx == sentinel());
    if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);

    /* A forced ISA does not look at MH_ISA, so it still works. */
    ctx = NULL;
    st = create(MH_ISA_SCALAR, &ctx);
    check_status("forced scalar with a bad MH_ISA", st, MH_OK);
    if (ctx) {
        check_true("forced scalar with a bad MH_ISA reports scalar", mh_context_isa(ctx) == MH_ISA_SCALAR);
        mh_context_destroy(ctx);
    }
    return test_exit_code("test_dispatch");
}

/* An MH_ISA_AUTO context must fail exactly like mh_isa_default() and leave *out alone. */
static void check_auto_fails(const char* tag, mh_status want) {
    char what[160];
    mh_isa got = (mh_isa)-1;
    snprintf(what, sizeof what, "%s: mh_isa_default", tag);
    check_status(what, mh_isa_default(&got), want);
    snprintf(what, sizeof what, "%s: mh_isa_default leaves out untouched", tag);
    check_true(what, got == (mh_isa)-1);
    mh_context* ctx = sentinel();
    const mh_status st = create(MH_ISA_AUTO, &ctx);
    snprintf(what, sizeof what, "%s: auto context", tag);
    check_status(what, st, want);
    snprintf(what, sizeof what, "%s: auto context leaves out untouched", tag);
    check_true(what, ctx == sentinel());
    if (st == MH_OK && ctx != sentinel()) mh_context_destroy(ctx);
}

static int run_consistency(void) {
    const char* env = getenv("MH_ISA");
    printf("test_dispatch: consistency with MH_ISA=%s\n", env ? env : "(unset)");
    check_forced_isas();
    mh_isa want = MH_ISA_AUTO;
    if (env && env[0]) {
        want = isa_by_name(env);
        if (want == MH_ISA_AUTO) {
            check_auto_fails("MH_ISA names no ISA", MH_ERR_INVALID_ARGUMENT);
            return test_exit_code("test_dispatch");
        }
        if (!mh_isa_supported(want)) {
            check_auto_fails("MH_ISA names an unavailable ISA", MH_ERR_ISA_UNAVAILABLE);
            return test_exit_code("test_dispatch");
        }
    }
    mh_isa got = MH_ISA_AUTO;
    const mh_status st = mh_isa_default(&got);
    check_status("mh_isa_default", st, MH_OK);
    if (st != MH_OK) return test_exit_code("test_dispatch");
    check_true("default ISA is supported", mh_isa_supported(got) == 1);
    if (want != MH_ISA_AUTO) {
        check_true("default ISA is the one MH_ISA names", got == want);
    } else {
        int simd = 0;
        for (int i = MH_ISA_SCALAR + 1; i < MH_ISA_COUNT; i++) simd |= mh_isa_supported((mh_isa)i);
        check_true("no MH_ISA: never scalar while a SIMD ISA is supported", got != MH_ISA_SCALAR || !simd);
    }
    mh_context* ctx = NULL;
    check_status("auto context: create", create(MH_ISA_AUTO, &ctx), MH_OK);
    if (ctx) {
        check_true("auto context reports mh_isa_default()", mh_context_isa(ctx) == got);
        mh_context_destroy(ctx);
    }
    return test_exit_code("test_dispatch");
}

int main(int argc, char** argv) {
    check_status("mh_isa_default(NULL)", mh_isa_default(NULL), MH_ERR_INVALID_ARGUMENT);
    if (argc == 3 && strcmp(argv[1], "--expect") == 0) return run_expect(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--expect-error") == 0) return run_expect_error();
    if (argc == 1) return run_consistency();
    fprintf(stderr, "usage: %s [--expect ISA_NAME | --expect-error]\n", argc > 0 ? argv[0] : "test_dispatch");
    return 2;
}
