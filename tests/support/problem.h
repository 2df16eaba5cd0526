/* Random attention problems for tests: owns its buffers, lays Q/K/V/O out in one of several
 * strided layouts, and stores K/V in the requested dtype. */
#ifndef MH_TEST_PROBLEM_H
#define MH_TEST_PROBLEM_H
#include "multihead.h"
#include "rng.h"

typedef enum test_layout {
    LAYOUT_TOKEN_MAJOR = 0, /* [B, T, H, D] contiguous */
    LAYOUT_HEAD_MAJOR = 1,  /* [B, H, T, D]: a cache-like layout */
    LAYOUT_PADDED = 2       /* token-major with odd padding after every row and head */
} test_layout;

typedef struct test_problem {
    mh_attn_problem p;
    float* q;
    void* k;
    void* v;
    float *k_scale, *v_scale; /* MH_DTYPE_I8 row scales, laid out like the rows; else NULL */
    float* o;
    size_t o_elems;
} test_problem;

/* Fills a problem of the given shape with values uniform in [-amp, amp). MH_DTYPE_I8 K/V are
 * random int8 with random row scales in [amp / 254, amp / 127], the scales in the layout of
 * the rows (strided like a [B, T, H, 1] tensor of that layout). */
void problem_make(test_problem* t, test_rng* r, int B, int N, int M, int H, int Hkv, int Dqk,
                  int Dv, mh_dtype kv_dtype, test_layout layout, float amp);
/* Refills K (v = 0) or V (v = 1) in another dtype, same layout and shape. */
void problem_set_kv(test_problem* t, test_rng* r, int v, mh_dtype dtype, test_layout layout, float amp);
void problem_free(test_problem* t);
/* Copies O ([B, N, H, Dv] through its strides) into a contiguous buffer. */
void problem_gather_o(const test_problem* t, float* dst);

/* Each with probability 1/4: a soft-cap, ALiBi slopes (into slopes [H]) and sinks (into
 * sinks [H]), set in o. */
void random_score_options(test_rng* r, int H, mh_attn_options* o, float* slopes, float* sinks);

/* Runs mh_attention with a fresh 64-aligned workspace; returns its status. */
mh_status run_attention(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt);

/* A context with the given thread count and MH_ISA_AUTO (so MH_ISA picks the ISA). Exits 77
 * (skipped) if MH_ISA names an ISA this machine lacks, 1 on any other failure. */
mh_context* test_context(int threads);

/* Emulators: one 4-MFLOP attention call takes at most a millisecond natively (tens of ms for
 * the scalar kernels under ASan), 0.02-0.1 s under qemu-user and ~2 s with its SVE, where a
 * test's full-size shapes would take many minutes. Returns 1 (and says so) under an emulator
 * (MH_TEST_EMULATED, set by tests/CMakeLists.txt for a cross build's tests) or when such a
 * call on ctx took more than limit_ms: the test then uses smaller shapes. The variable makes
 * the emulated runs' shapes fixed: timed alone, NEON under qemu took 20-30 ms, around the
 * limit of 20 of test_decode_layouts, which then ran its full shapes in CI (50 s). */
int slow_machine(const mh_context* ctx, double limit_ms);

#endif
