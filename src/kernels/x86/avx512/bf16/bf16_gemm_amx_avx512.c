/*
 * bf16 GEMM micro-kernels on AMX tiles (Intel Sapphire Rapids and later: TDPBF16PS), up to 32
 * rows x 64 columns, f32 accumulation: the gemm_bf16 / gemm_acc_bf16 slots of the AVX-512
 * table when mh_cpu_bf16_gemm() says AMX (MH_BF16_GEMM=amx, granted by the OS), which then
 * sets gemm_mr_bf16 to MH_AMX_MR. Operands as the VDPBF16PS kernels': A [m][k] bf16, rows lda
 * apart, and a panel of k-pairs [ceil(k/2)][64][2], whose 16-column slices are TDPBF16PS's B
 * layout as they are ([pairs][16][2], rows 256 bytes apart).
 *
 * Tiles, all 16 rows x 64 bytes: A in 4 (rows 0-15) and 5 (rows 16-31), B in 6 and 7 (16
 * columns each), C in 0-3, one per (A, B) pair: the micro-tile runs as two halves of 32
 * columns, each over the whole of k. A step takes 16 k-pairs: 2 A and 2 B loads for 4
 * TDPBF16PS, where one 16-row A tile against four B tiles loaded 5 for 4. The panel (B) is
 * what comes from L2 (a Q.K^T task's K tile is 128 KiB in bf16 at 512 keys of 128 dims) and
 * each of its tiles now serves 32 rows: measured on a Xeon with AMX (MHA causal prefill
 * N = M = 2048, H32 D128, 1 thread), 16 rows x 64 columns ran the GEMMs at about a quarter
 * of the TDPBF16PS rate.
 *
 * One configuration for every call, loaded only when the thread's current one differs
 * (LDTILECFG takes about 50 ns, STTILECFG and the compare 8; other code in the thread may
 * have loaded its own: the psABI makes the tile state call-clobbered). A step reads the
 * caller's rows in place when a tile's are all there (16 rows, 16 whole pairs); otherwise
 * (fewer rows, the last pairs of k, an odd k's half pair) zero-padded copies on the stack, so
 * nothing past the operands is read and an odd k's pad element (NaN, say) counts for
 * nothing. C goes through a [32][64] f32 buffer on the stack, from which the m x n corner is
 * written (plain, or alpha * c + C), except for a whole 32 x 64 gemm_bf16, stored in place.
 * Each k-pair requests one line of the fetch, as the other bf16 kernels do.
 *
 * Accumulation order: TDPBF16PS adds each pair's two products into the f32 sum with round to
 * nearest even, input and output denormals flushed to zero (the products are exact); the
 * sums are therefore not the VDPBF16PS kernels' bit for bit.
 */
#include <stdint.h>
#include <string.h>

#include "kernels/x86/avx512/bf16/amx_tiles.h"
#include "kernels/x86/avx512/bf16/bf16_gemm_amx_avx512.h"
#include "kernels/x86/avx512/simd_avx512.h"

#define NR 64
#define TR 16            /* rows of every tile */
#define STEP 16          /* k-pairs per tile step */
#define ROW_BYTES 64     /* every tile's row */
#define B_STRIDE (NR * 4) /* bytes between a panel's pair rows */
_Static_assert(MH_AMX_MR == 2 * TR, "two A tiles of rows");

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct amx_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;
_Static_assert(sizeof(amx_config) == 64, "LDTILECFG reads 64 bytes");

#define TILE_ALL(x) {x, x, x, x, x, x, x, x} /* tiles 0-7; 8-15 do not exist in palette 1 */
static _Alignas(64) const amx_config WANT = {.palette = 1, .colsb = TILE_ALL(ROW_BYTES), .rows = TILE_ALL(TR)};

/* Tiles 0-7 all 16 x 64 bytes, loaded unless the thread's configuration already is it. */
static void configure(void) {
    _Alignas(64) amx_config now;
    MH_TILE_CFG_STORE(&now);
    if (memcmp(&now, &WANT, sizeof WANT) != 0) MH_TILE_CFG_LOAD(&WANT);
}

/* A's 32 elements from 2 * kp of rows [r0, min(m, r0 + 16)), elements from k on zero, the
 * rows past m zero. */
static void copy_a(size_t m, size_t r0, size_t k, size_t kp, const uint16_t* a, size_t lda, uint16_t as[TR * 32]) {
    const size_t e0 = 2 * kp, ne = k - e0 < 32 ? k - e0 : 32;
    memset(as, 0, TR * 32 * sizeof(uint16_t));
    for (size_t r = r0; r < m && r < r0 + TR; r++) memcpy(as + (r - r0) * 32, a + r * lda + e0, ne * sizeof(uint16_t));
}

/* The panel's pair rows [kp, kp + np) (np <= STEP), the last one's second elements zero when k
 * is odd (they lie past k), pair rows from np on zero. */
static void copy_b(size_t k, size_t kp, size_t np, const uint16_t* panel, uint16_t bs[STEP * NR * 2]) {
    memset(bs, 0, STEP * NR * 2 * sizeof(uint16_t));
    memcpy(bs, panel + kp * NR * 2, np * NR * 2 * sizeof(uint16_t));
    if (k % 2 && kp + np == (k + 1) / 2)
        for (size_t j = 0; j < NR; j++) bs[(np - 1) * NR * 2 + 2 * j + 1] = 0;
}

/* Columns [32 h, 32 h + 32) of A x panel into C tiles 0-3 (tile 2 a + b: A rows 16 a, panel
 * columns 32 h + 16 b), accumulated from zero, or from `from` (a whole [32][64] block of C,
 * rows ldf apart, all four tiles loaded); the tiles past m rows or n columns then unused. */
static void product_half(size_t m, size_t n, size_t k, size_t h, const uint16_t* a, size_t lda, const uint16_t* panel,
                         const float* from, size_t ldf, mh_fetch* f) {
    _Alignas(64) uint16_t as[TR * 32];
    _Alignas(64) uint16_t bs[STEP * NR * 2];
    const size_t pairs = (k + 1) / 2;
    const int two_rows = m > TR, two_cols = n > 32 * h + 16;
    if (from) { /* accumulating onto C: the tiles start as C */
        const size_t stride = ldf * sizeof(float);
        MH_TILE_LOAD(0, from + 32 * h, stride);
        MH_TILE_LOAD(1, from + 32 * h + 16, stride);
        MH_TILE_LOAD(2, from + TR * ldf + 32 * h, stride);
        MH_TILE_LOAD(3, from + TR * ldf + 32 * h + 16, stride);
    } else {
        MH_TILE_ZERO(0);
        if (two_cols) MH_TILE_ZERO(1);
        if (two_rows) MH_TILE_ZERO(2);
        if (two_rows && two_cols) MH_TILE_ZERO(3);
    }
    for (size_t kp = 0; kp < pairs; kp += STEP) {
        const size_t np = pairs - kp < STEP ? pairs - kp : STEP;
        const int whole = np == STEP && 2 * (kp + STEP) <= k; /* 16 pairs, none past k */
        for (size_t i = 0; f && i < np; i++) mh_fetch_line(f);
        const uint16_t* bt = panel + kp * NR * 2 + h * 64;
        if (!whole) copy_b(k, kp, np, panel, bs), bt = bs + h * 64;
        if (whole && m >= TR) {
            MH_TILE_LOAD(4, a + 2 * kp, lda * sizeof(uint16_t));
        } else {
            copy_a(m, 0, k, kp, a, lda, as);
            MH_TILE_LOAD(4, as, ROW_BYTES);
        }
        MH_TILE_LOAD(6, bt, B_STRIDE);
        MH_TILE_DPBF16(0, 4, 6);
        if (two_cols) {
            MH_TILE_LOAD(7, bt + 32, B_STRIDE);
            MH_TILE_DPBF16(1, 4, 7);
        }
        if (!two_rows) continue;
        if (whole && m >= 2 * TR) {
            MH_TILE_LOAD(5, a + TR * lda + 2 * kp, lda * sizeof(uint16_t));
        } else {
            copy_a(m, TR, k, kp, a, lda, as);
            MH_TILE_LOAD(5, as, ROW_BYTES);
        }
        MH_TILE_DPBF16(2, 5, 6);
        if (two_cols) MH_TILE_DPBF16(3, 5, 7);
    }
}

/* Half h's C tiles (those product_half wrote) into rows of dst, ld floats apart, dst at row 0
 * and column 32 h of C. */
static void store_half(size_t m, size_t n, size_t h, float* dst, size_t ld) {
    const size_t stride = ld * sizeof(float);
    const int two_rows = m > TR, two_cols = n > 32 * h + 16;
    MH_TILE_STORE(0, dst, stride);
    if (two_cols) MH_TILE_STORE(1, dst + 16, stride);
    if (two_rows) MH_TILE_STORE(2, dst + TR * ld, stride);
    if (two_rows && two_cols) MH_TILE_STORE(3, dst + TR * ld + 16, stride);
}

/* A x panel's m x n corner (columns past n and rows past m unset), added onto `from` (rows
 * ldf apart: a whole 32 x 64 block) unless it is NULL, into cs [32][64]; or, for a whole
 * 32 x 64 micro-tile when `in_place`, straight into c (rows ldc apart). */
static void product(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                    mh_fetch* fetch, const float* from, size_t ldf, int in_place, float* c, size_t ldc,
                    float cs[MH_AMX_MR * NR]) {
    configure();
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t h = 0; 32 * h < n; h++) {
        product_half(m, n, k, h, a, lda, panel, from, ldf, h == 0 ? &f : NULL);
        if (in_place) store_half(m, n, h, c + 32 * h, ldc);
        else store_half(m, n, h, cs + 32 * h, NR);
    }
    mh_fetch_end(fetch, &f);
}

/* C's m x n corner into cs [32][64] (the rest zero), or back. */
static void corner_in(size_t m, size_t n, const float* c, size_t ldc, float cs[MH_AMX_MR * NR]) {
    for (size_t r = 0; r < MH_AMX_MR; r++)
        for (size_t j = 0; j < NR; j += 16) {
            const __mmask16 mask = r < m ? mh_mask16(n, j) : 0;
            _mm512_store_ps(cs + r * NR + j, _mm512_maskz_loadu_ps(mask, c + r * ldc + j));
        }
}

static void corner_out(size_t m, size_t n, const float cs[MH_AMX_MR * NR], float* c, size_t ldc) {
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j += 16)
            _mm512_mask_storeu_ps(c + r * ldc + j, mh_mask16(n, j), _mm512_load_ps(cs + r * NR + j));
}

/* 1 if every one of the m rows' alpha is 1 (the projections' accumulation). */
static int alpha_ones(size_t m, const float* alpha) {
    for (size_t r = 0; r < m; r += 16) {
        const __mmask16 rows = mh_mask16(m, r);
        const __m512 al = _mm512_maskz_loadu_ps(rows, alpha + r);
        if (_mm512_mask_cmpeq_ps_mask(rows, al, _mm512_set1_ps(1.0f)) != rows) return 0;
    }
    return 1;
}

void MH_KNAME(gemm_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             float* c, size_t ldc, mh_fetch* fetch) {
    _Alignas(64) float cs[MH_AMX_MR * NR];
    const int whole = m == MH_AMX_MR && n == NR;
    product(m, n, k, a, lda, panel, fetch, NULL, 0, whole, c, ldc, cs);
    if (!whole) corner_out(m, n, cs, c, ldc);
}

/* Where every row's alpha is 1 (the projections' blocks of k after the first), the products
 * are added onto C in the tiles, whatever m and n (a row's sums then do not depend on the
 * rows beside it, which a forward and a decode group differently); else C is scaled and added
 * to the products in vectors. */
void MH_KNAME(gemm_acc_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                 const uint16_t* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    _Alignas(64) float cs[MH_AMX_MR * NR];
    const int whole = m == MH_AMX_MR && n == NR;
    if (alpha_ones(m, alpha)) {
        if (whole) {
            product(m, n, k, a, lda, panel, fetch, c, ldc, 1, c, ldc, cs);
            return;
        }
        corner_in(m, n, c, ldc, cs);
        product(m, n, k, a, lda, panel, fetch, cs, NR, 0, c, ldc, cs);
        corner_out(m, n, cs, c, ldc);
        return;
    }
    product(m, n, k, a, lda, panel, fetch, NULL, 0, 0, c, ldc, cs);
    for (size_t r = 0; r < m; r++) {
        const __m512 al = _mm512_set1_ps(alpha[r]);
        for (size_t j = 0; j < n; j += 16) {
            const __mmask16 mask = mh_mask16(n, j);
            float* cp = c + r * ldc + j;
            _mm512_mask_storeu_ps(cp, mask, _mm512_fmadd_ps(al, _mm512_maskz_loadu_ps(mask, cp), _mm512_load_ps(cs + r * NR + j)));
        }
    }
}
