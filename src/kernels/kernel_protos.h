/*
 * Included by every kernel source. The build compiles each ISA's sources (its folder and
 * src/kernels/generic) with -DMH_ISA_SUFFIX=<name> -DMH_ISA_ENUM=<ENUM> and
 * -DMH_SIMD_HEADER="<folder>/simd_<name>.h" (cmake/kernels.cmake, from the ISA registry), so
 * MH_KNAME(slot) is that ISA's kernel, e.g. mh_softmax_tile__avx2.
 */
#ifndef MH_KERNEL_PROTOS_H
#define MH_KERNEL_PROTOS_H
#include "kernels/kernel_list.h"
#include "kernels/kernels.h"

#define MH_KNAME_(slot, isa) mh_##slot##__##isa
#define MH_KNAME_X(slot, isa) MH_KNAME_(slot, isa)
#define MH_KNAME(slot) MH_KNAME_X(slot, MH_ISA_SUFFIX)
#define MH_ISA_VALUE_(e) MH_ISA_##e
#define MH_ISA_VALUE(e) MH_ISA_VALUE_(e)

#define MH_KERNEL_PROTO(slot, ret, params) ret MH_KNAME(slot) params;
MH_KERNEL_LIST(MH_KERNEL_PROTO)
MH_KERNEL_LIST_BF16(MH_KERNEL_PROTO)
#undef MH_KERNEL_PROTO

/* The scalar kernels, which any ISA may call for a tail it does not vectorise. */
#define MH_KERNEL_PROTO_SCALAR(slot, ret, params) ret mh_##slot##__scalar params;
MH_KERNEL_LIST(MH_KERNEL_PROTO_SCALAR)
#undef MH_KERNEL_PROTO_SCALAR

/* Calls fn(<dtype as a constant>, args...), so an always-inline body is specialised per
 * storage dtype. */
#define MH_WITH_DTYPE(dtype, fn, ...) \
    switch (dtype) { \
    case MH_DTYPE_F16: fn(MH_DTYPE_F16, __VA_ARGS__); break; \
    case MH_DTYPE_BF16: fn(MH_DTYPE_BF16, __VA_ARGS__); break; \
    case MH_DTYPE_I8: fn(MH_DTYPE_I8, __VA_ARGS__); break; \
    default: fn(MH_DTYPE_F32, __VA_ARGS__); break; \
    }

/* The direct kernels' row counts 1-5 (rows < attn_direct_rows = MH_GEMM_MR = 6 on every
 * ISA): MH_ROWS_FNS(fn, (params), (args)) defines fn1 .. fn5(params), each running the
 * always-inline fn(<rows as a constant>, args), and MH_WITH_ROWS(rows, fn, args...) calls the
 * one for rows (other counts do nothing). Under AddressSanitizer each is a function of its
 * own: a kernel holding all five (times four dtypes) in one function took clang 287 s to
 * compile under ASan and UBSan, the critical path of the fuzz build. Elsewhere they are
 * inlined into the kernel, as before: out of line, GQA-8 int8 decode took 1.04-1.06x the time
 * (Zen 5, alternated). */
#if defined(__SANITIZE_ADDRESS__)
#define MH_KERNELS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MH_KERNELS_ASAN 1
#endif
#endif
#ifdef MH_KERNELS_ASAN
#define MH_ROWS_FN_ATTR static __attribute__((noinline))
#else
#define MH_ROWS_FN_ATTR static inline __attribute__((always_inline))
#endif
#define MH_UNPAREN(...) __VA_ARGS__
#define MH_ROWS_FN(fn, R, params, args) \
    MH_ROWS_FN_ATTR void fn##R params { fn(R, MH_UNPAREN args); }
#define MH_ROWS_FNS(fn, params, args) \
    MH_ROWS_FN(fn, 1, params, args) \
    MH_ROWS_FN(fn, 2, params, args) \
    MH_ROWS_FN(fn, 3, params, args) \
    MH_ROWS_FN(fn, 4, params, args) \
    MH_ROWS_FN(fn, 5, params, args)
#define MH_WITH_ROWS(rows, fn, ...) \
    switch (rows) { \
    case 1: fn##1(__VA_ARGS__); break; \
    case 2: fn##2(__VA_ARGS__); break; \
    case 3: fn##3(__VA_ARGS__); break; \
    case 4: fn##4(__VA_ARGS__); break; \
    case 5: fn##5(__VA_ARGS__); break; \
    default: break; \
    }

#define MH_PRAGMA_(x) _Pragma(#x) /* a pragma from a macro's argument */

/* MH_UNROLL(n) before a loop over a register array's index (n: at least its constant bound)
 * unrolls it early under GCC, so the array becomes registers: otherwise GCC 12 keeps arrays
 * such as the AVX-512 GEMM's 24 accumulators in stack slots, written after the loop over them
 * and read back before the next (docs/kernels.md, "Register budgets"; the NEON kernels' loops
 * take 16). Clang keeps them in registers as they are, and with the pragma spilled inside the
 * AVX-512 GEMM's loop: GCC only. Not under AddressSanitizer, where it only costs compile time
 * (the AVX-512 direct kernels with ASan and UBSan: gcc 26 -> 60 s). */
#if defined(__clang__) || defined(MH_KERNELS_ASAN)
#define MH_UNROLL(n)
#else
#define MH_UNROLL(n) MH_PRAGMA_(GCC unroll n)
#endif

/* MH_UNROLL_STEPS(n) before a reduction loop whose step is short beside its pointer and
 * counter updates unrolls it n steps under GCC and clang alike (AVX2's GEMM: docs/kernels.md,
 * "Register budgets"). Not under AddressSanitizer either, where it only costs compile time
 * (that GEMM with ASan and UBSan, gcc: 4 -> 16 s). */
#ifdef MH_KERNELS_ASAN
#define MH_UNROLL_STEPS(n)
#else
#define MH_UNROLL_STEPS(n) MH_PRAGMA_(GCC unroll n)
#endif

/* The head widths the x86 direct kernels compile as constants. MH_WITH_WIDTH(w, name, stmt)
 * runs stmt with `name` a const size_t equal to w, the constant MH_CONST_WIDTH when w is it.
 * 128 is the head dim of most language models; at it the loops over the width unroll whole and
 * lose their tail code (hot decode, Zen 5, alternated, f16 or int8 K/V: MHA 0.88-0.91x the time
 * on AVX-512, 0.77-0.84x on AVX2; four query rows per K/V head 0.90-0.96x). Other widths run
 * the same code with the width a variable: the same operations in the same order, the same
 * bits. Not under AddressSanitizer, whose compile time it raises most (MH_ROWS_FNS; the AVX-512
 * direct kernels with ASan and UBSan: gcc 23 -> 37 s, clang 121 -> 202 s).
 *
 * Width 64 (GPT-2, BERT, Whisper, ViTs, smaller language models) gets a copy of the kernels of
 * its own, compiled from the same bodies (attention_direct_<isa>.h) in a file of its own
 * (attention_direct_w64_<isa>.c: MH_DIRECT_WIDTH is MH_WITH_WIDTH_64 there), to which the
 * entries (kernels/x86/attention_direct_entries.h) hand width-64 calls when MH_DIRECT_W64 is 1
 * (not under ASan). MHA decode at 32K keys, H16 D64, Zen 5, against the width as a variable:
 * AVX-512 int8 0.75x the time, f16 0.98x (bound by memory; 0.81x in L2); AVX2 int8 0.77x, f16
 * 0.89x (docs/kernels.md, "Decode kernels", has the rest, and why a file of its own rather than
 * a third branch here). */
#define MH_CONST_WIDTH 128
#define MH_WITH_WIDTH_64(w, name, ...) \
    { \
        const size_t name = 64; \
        (void)(w); \
        __VA_ARGS__ \
    }
#ifdef MH_DIRECT_COPY_W64 /* the file compiling the copy for width 64 */
#define MH_DIRECT_WIDTH MH_WITH_WIDTH_64
#else
#define MH_DIRECT_WIDTH MH_WITH_WIDTH
#endif
void MH_KNAME(qk_direct_w64)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k,
                             float* s, size_t lds);
void MH_KNAME(pv_direct_w64)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                             const float* alpha, float* o, size_t ldo);
#ifdef MH_KERNELS_ASAN
#define MH_DIRECT_W64 0
#define MH_WITH_WIDTH(w, name, ...) \
    { \
        const size_t name = (w); \
        __VA_ARGS__ \
    }
#else
#define MH_DIRECT_W64 1
#define MH_WITH_WIDTH(w, name, ...) \
    if ((w) == MH_CONST_WIDTH) { \
        const size_t name = MH_CONST_WIDTH; \
        __VA_ARGS__ \
    } else { \
        const size_t name = (w); \
        __VA_ARGS__ \
    }
#endif

/* The table init of this ISA (table_<name>.c): MH_KERNEL_TABLE_FILL, then the tile sizes. */
void MH_KNAME(kernels_init)(mh_kernels* k);

/* Points every slot of the table at this ISA's kernel and sets its isa; the bf16 slots only
 * where the build compiled this ISA's bf16 kernels (MH_BF16_KERNELS), else they stay NULL.
 * The argument must be the init's parameter `k` (MH_KERNEL_SET_SLOT names it). */
#define MH_KERNEL_SET_SLOT(slot, ret, params) k->slot = MH_KNAME(slot);
#ifdef MH_BF16_KERNELS
#define MH_KERNEL_FILL_BF16 MH_KERNEL_LIST_BF16(MH_KERNEL_SET_SLOT)
#else
#define MH_KERNEL_FILL_BF16
#endif
#define MH_KERNEL_TABLE_FILL(k) \
    do { \
        _Static_assert(MH_GEMM_MR <= MH_GEMM_MR_MAX, "buffers of whole micro-tiles are sized by MH_GEMM_MR_MAX"); \
        (k)->isa = MH_ISA_VALUE(MH_ISA_ENUM); \
        MH_KERNEL_LIST(MH_KERNEL_SET_SLOT) \
        MH_KERNEL_FILL_BF16 \
    } while (0)

#endif
