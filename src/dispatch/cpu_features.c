#define _DEFAULT_SOURCE /* syscall (arch_prctl), sysconf's cache sizes */
#include "dispatch/cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "dispatch/isa_list.h"

/* One cpu_has_<name>() per registry row; each answers 0 off its architecture. */

static int cpu_has_scalar(void) { return 1; }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdint.h>

/* XCR0 through XGETBV, only valid when CPUID says OSXSAVE. The OS must enable the register
 * state (YMM for AVX, opmask+ZMM for AVX-512) or the instructions fault even on a capable CPU. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static int x86_has(mh_isa isa) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    const uint64_t xcr0 = read_xcr0();
    const int ymm_state = (xcr0 & 0x6) == 0x6;    /* SSE + AVX state */
    const int zmm_state = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM_Hi256, Hi16_ZMM */
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1;
    const int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
    if (isa == MH_ISA_AVX2) return ymm_state && avx2 && fma && f16c;
    if (isa == MH_ISA_AVX512) return zmm_state && avx2 && fma && f16c && avx512;
    return 0;
}

/* CPUID leaf 7 subleaf 1, EAX bit 5: AVX512_BF16 (the OS state is AVX-512's). */
static int x86_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    if (!x86_has(MH_ISA_AVX512)) return 0;
    __cpuid_count(7, 1, a, b, c, d);
    return (a >> 5) & 1;
}
#if defined(__linux__)
#include <sys/syscall.h>
#ifndef ARCH_REQ_XCOMP_PERM
#define ARCH_REQ_XCOMP_PERM 0x1023
#endif
#define XFEATURE_XTILEDATA 18
/* AMX-BF16 on this CPU: CPUID leaf 7 EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), and XCR0 bits
 * 17-18 (the OS manages the tile state). Beside AVX512-BF16, whose table holds the slots. */
static int x86_has_amx_bf16(void) {
    unsigned a, b, c, d;
    if (!x86_has_avx512_bf16()) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
    return (read_xcr0() & (UINT64_C(3) << 17)) == (UINT64_C(3) << 17);
}

/* This process granted the tile data (Linux 5.16+; a kernel that refuses it leaves AMX off). */
static int x86_request_amx(void) { return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0; }
#else
static int x86_has_amx_bf16(void) { return 0; }
static int x86_request_amx(void) { return 0; }
#endif
/* CPUID leaf 0's vendor string is "GenuineIntel". */
static int x86_is_intel(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* "Genu" "ineI" "ntel" */
}
/* CPUID leaf 0's vendor string is "AuthenticAMD" and leaf 1's family (base, plus extended
 * when the base is 0xf) is at least `family`. */
static int x86_is_amd_from(unsigned family) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u)
        return 0; /* "Auth" "enti" "cAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned base = (a >> 8) & 0xf;
    return base + (base == 0xf ? (a >> 20) & 0xff : 0) >= family;
}
static int cpu_has_avx2(void) { return x86_has(MH_ISA_AVX2); }
static int cpu_has_avx512(void) { return x86_has(MH_ISA_AVX512); }
#else
static int cpu_has_avx2(void) { return 0; }
static int cpu_has_avx512(void) { return 0; }
static int x86_has_avx512_bf16(void) { return 0; }
static int x86_has_amx_bf16(void) { return 0; }
static int x86_request_amx(void) { return 0; }
static int x86_is_intel(void) { return 0; }
static int x86_is_amd_from(unsigned family) { return (void)family, 0; }
#endif

#if defined(__aarch64__)
static int cpu_has_neon(void) { return 1; } /* Advanced SIMD is mandatory on AArch64 */
#else
static int cpu_has_neon(void) { return 0; }
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef HWCAP2_SVEBF16
#define HWCAP2_SVEBF16 (1UL << 12)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif
static int cpu_has_sve(void) { return (getauxval(AT_HWCAP) & HWCAP_SVE) != 0; }
static int arm_has_bf16(mh_isa isa) {
    const unsigned long hw2 = getauxval(AT_HWCAP2);
    if (isa == MH_ISA_NEON) return (hw2 & HWCAP2_BF16) != 0;
    return isa == MH_ISA_SVE && cpu_has_sve() && (hw2 & HWCAP2_SVEBF16) != 0;
}
#else
static int cpu_has_sve(void) { return 0; }
static int arm_has_bf16(mh_isa isa) { return (void)isa, 0; }
#endif

static int detect_isa(mh_isa isa) {
    switch (isa) {
#define DETECT_CASE(E, name, ...) \
    case MH_ISA_##E: return cpu_has_##name();
        MH_ISA_LIST(DETECT_CASE)
    default: return 0;
    }
}

static int detect_bf16(mh_isa isa) {
    if (!detect_isa(isa)) return 0;
    switch (isa) {
    case MH_ISA_SCALAR: return 1;
    case MH_ISA_AVX512: return x86_has_avx512_bf16();
    case MH_ISA_NEON:
    case MH_ISA_SVE: return arm_has_bf16(isa);
    default: return 0;
    }
}

/* Detected once per process: CPUID traps to the hypervisor in a virtual machine (about 10 us
 * per instruction, 40 us per ISA on a Firecracker VM), and the answers never change. */
static int g_has_isa[MH_ISA_COUNT], g_has_bf16[MH_ISA_COUNT];
static pthread_once_t g_detect_once = PTHREAD_ONCE_INIT;

static void detect_all(void) {
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++) {
        g_has_isa[i] = detect_isa((mh_isa)i);
        g_has_bf16[i] = detect_bf16((mh_isa)i);
    }
}

int mh_cpu_has_isa(mh_isa isa) {
    if (isa <= MH_ISA_AUTO || isa >= MH_ISA_COUNT) return 0;
    pthread_once(&g_detect_once, detect_all);
    return g_has_isa[isa];
}

int mh_cpu_has_bf16(mh_isa isa) {
    if (isa <= MH_ISA_AUTO || isa >= MH_ISA_COUNT) return 0;
    pthread_once(&g_detect_once, detect_all);
    return g_has_bf16[isa];
}

/* AMD Zen 3, whose decode rules are its own: family 0x19 (Zen 3 and Zen 4) without AVX-512,
 * which Zen 4 has. */
static int amd_is_zen3(void) { return x86_is_amd_from(0x19) && !x86_is_amd_from(0x1a) && !cpu_has_avx512(); }

mh_prefetch_rule mh_cpu_decode_prefetch(void) {
    const char* env = getenv("MH_DECODE_PREFETCH");
    if (env && strcasecmp(env, "l2") == 0) return MH_PREFETCH_L2;
    if (env && strcasecmp(env, "l1") == 0) return MH_PREFETCH_L1;
    if (env && strcasecmp(env, "all") == 0) return MH_PREFETCH_ALL;
    if (env && strcasecmp(env, "turn") == 0) return MH_PREFETCH_TURN;
    if (x86_is_intel()) return MH_PREFETCH_ALL;
    if (x86_is_amd_from(0x1a)) return MH_PREFETCH_L1;
    return amd_is_zen3() ? MH_PREFETCH_TURN : MH_PREFETCH_L2;
}

mh_heads_rule mh_cpu_decode_heads(void) {
    const char* env = getenv("MH_DECODE_HEADS");
    if (env && strcasecmp(env, "l1") == 0) return MH_HEADS_L1;
    if (env && strcasecmp(env, "any") == 0) return MH_HEADS_ANY;
    return amd_is_zen3() ? MH_HEADS_ANY : MH_HEADS_L1;
}

/* sysconf's size of a cache (name: _SC_LEVEL..._SIZE), or fallback where it says nothing. */
static size_t cache_bytes(int name, size_t fallback) {
    const long bytes = sysconf(name);
    return bytes > 0 ? (size_t)bytes : fallback;
}

size_t mh_cpu_l1d_bytes(void) { return cache_bytes(_SC_LEVEL1_DCACHE_SIZE, MH_CPU_L1D_DEFAULT); }

size_t mh_cpu_l2_bytes(void) { return cache_bytes(_SC_LEVEL2_CACHE_SIZE, MH_CPU_L2_DEFAULT); }

mh_bf16_gemm mh_cpu_bf16_gemm(void) {
    const char* env = getenv("MH_BF16_GEMM");
    if (env && strcasecmp(env, "fma") == 0) return MH_BF16_GEMM_FMA;
    if (env && strcasecmp(env, "dot") == 0) return MH_BF16_GEMM_DOT;
    if (x86_has_amx_bf16()) return MH_BF16_GEMM_AMX;
    return mh_cpu_bf16_gemm_fallback();
}

mh_bf16_gemm mh_cpu_bf16_gemm_fallback(void) { return x86_is_intel() ? MH_BF16_GEMM_FMA : MH_BF16_GEMM_DOT; }

int mh_cpu_request_amx(void) { return x86_request_amx(); }
