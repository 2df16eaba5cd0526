/*
 * bf16 GEMM micro-kernels on AMX tiles (Intel Sapphire Rapids and later: TDPBF16PS), up to 16
 * rows x 64 columns, f32 accumulation: the gemm_bf16 / gemm_acc_bf16 slots of the AVX-512
 * table when mh_cpu_bf16_gemm() says AMX (MH_BF16_GEMM=amx, granted by the OS), which then
 * sets gemm_mr_bf16 to MH_AMX_MR. Operands as the VDPBF16PS kernels': A [m][k] bf16, rows lda
 * apart, and a panel of k-pairs [ceil(k/2)][64][2], whose 16-column slices are TDPBF16PS's B
 * layout as they are ([pairs][16][2], rows 256 bytes apart).
 *
 * Tiles, all 16 rows x 64 bytes: C in 0-3 (16 f32 columns each), A in 4 (16 k-pairs), B in
 * 5-7 (one per C tile, the fourth reusing 5). A step takes 16 k-pairs. One configuration for
 * every call, loaded only when the thread's current one differs (LDTILECFG is slow, and other
 * code in the thread may have loaded its own: the psABI makes the tile state call-clobbered).
 * A step reads the caller's rows in place when they are all there (16 rows, 16 whole pairs);
 * otherwise (fewer rows, the last pairs of k, an odd k's half pair) zero-padded copies on the
 * stack, so nothing past the operands is read and an odd k's pad element (NaN, say) counts
 * for nothing. C goes through a [16][64] f32 buffer on the stack, from which the m x n corner
 * is written (plain, or alpha * c + C), except for a whole 16 x 64 gemm_bf16, stored in place.
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
#define STEP 16          /* k-pairs per tile step */
#define ROW_BYTES 64     /* every tile's row */
#define B_STRIDE (NR * 4) /* bytes between a panel's pair rows */

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
static _Alignas(64) const amx_config WANT = {.palette = 1, .colsb = TILE_ALL(ROW_BYTES), .rows = TILE_ALL(MH_AMX_MR)};

/* Tiles 0-7 all 16 x 64 bytes, loaded unless the thread's configuration already is it. */
static void configure(void) {
    _Alignas(64) amx_config now;
    MH_TILE_CFG_STORE(&now);
    if (memcmp(&now, &WANT, sizeof WANT) != 0) MH_TILE_CFG_LOAD(&WANT);
}

/* A's 32 elements from 2 * kp of rows [0, m), elements from k on zero, rows from m on zero. */
static void copy_a(size_t m, size_t k, size_t kp, const uint16_t* a, size_t lda, uint16_t as[MH_AMX_MR * 32]) {
    const size_t e0 = 2 * kp, ne = k - e0 < 32 ? k - e0 : 32;
    memset(as, 0, MH_AMX_MR * 32 * sizeof(uint16_t));
    for (size_t r = 0; r < m; r++) memcpy(as + r * 32, a + r * lda + e0, ne * sizeof(uint16_t));
}

/* The panel's pair rows [kp, kp + np) (np <= STEP), the last one's second elements zero when k
 * is odd (they lie past k), pair rows from np on zero. */
static void copy_b(size_t k, size_t kp, size_t np, const uint16_t* panel, uint16_t bs[STEP * NR * 2]) {
    memset(bs, 0, STEP * NR * 2 * sizeof(uint16_t));
    memcpy(bs, panel + kp * NR * 2, np * NR * 2 * sizeof(uint16_t));
    if (k % 2 && kp + np == (k + 1) / 2)
        for (size_t j = 0; j < NR; j++) bs[(np - 1) * NR * 2 + 2 * j + 1] = 0;
}

/* C tiles 0 .. ceil(n / 16) - 1 = A x panel, accumulated from zero. */
static void product(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel, mh_fetch* fetch) {
    _Alignas(64) uint16_t as[MH_AMX_MR * 32];
    _Alignas(64) uint16_t bs[STEP * NR * 2];
    const size_t pairs = (k + 1) / 2, nt = (n + 15) / 16;
    configure();
    MH_TILE_ZERO(0);
    MH_TILE_ZERO(1);
    MH_TILE_ZERO(2);
    MH_TILE_ZERO(3);
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kp = 0; kp < pairs; kp += STEP) {
        const size_t np = pairs - kp < STEP ? pairs - kp : STEP;
        const int whole = np == STEP && 2 * (kp + STEP) <= k; /* 16 pairs, none past k */
        for (size_t i = 0; i < np; i++) mh_fetch_line(&f);
        const uint16_t* at = a + 2 * kp;
        size_t a_stride = lda * sizeof(uint16_t);
        if (!whole || m < MH_AMX_MR) copy_a(m, k, kp, a, lda, as), at = as, a_stride = ROW_BYTES;
        const uint16_t* bt = panel + kp * NR * 2;
        if (!whole) copy_b(k, kp, np, panel, bs), bt = bs;
        MH_TILE_LOAD(4, at, a_stride);
        MH_TILE_LOAD(5, bt, B_STRIDE);
        MH_TILE_DPBF16(0, 4, 5);
        if (nt > 1) {
            MH_TILE_LOAD(6, bt + 32, B_STRIDE);
            MH_TILE_DPBF16(1, 4, 6);
        }
        if (nt > 2) {
            MH_TILE_LOAD(7, bt + 64, B_STRIDE);
            MH_TILE_DPBF16(2, 4, 7);
        }
        if (nt > 3) {
            MH_TILE_LOAD(5, bt + 96, B_STRIDE);
            MH_TILE_DPBF16(3, 4, 5);
        }
    }
    mh_fetch_end(fetch, &f);
}

/* The C tiles of n columns into rows of dst, ld floats apart. */
static void store_tiles(size_t n, float* dst, size_t ld) {
    const size_t nt = (n + 15) / 16, stride = ld * sizeof(float);
    MH_TILE_STORE(0, dst, stride);
    if (nt > 1) MH_TILE_STORE(1, dst + 16, stride);
    if (nt > 2) MH_TILE_STORE(2, dst + 32, stride);
    if (nt > 3) MH_TILE_STORE(3, dst + 48, stride);
}

void MH_KNAME(gemm_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             float* c, size_t ldc, mh_fetch* fetch) {
    product(m, n, k, a, lda, panel, fetch);
    if (m == MH_AMX_MR && n == NR) {
        store_tiles(n, c, ldc);
        return;
    }
    _Alignas(64) float cs[MH_AMX_MR * NR];
    store_tiles(n, cs, NR);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j += 16) {
            const __mmask16 mask = mh_mask16(n, j);
            _mm512_mask_storeu_ps(c + r * ldc + j, mask, _mm512_load_ps(cs + r * NR + j));
        }
}

void MH_KNAME(gemm_acc_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                 const uint16_t* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    product(m, n, k, a, lda, panel, fetch);
    _Alignas(64) float cs[MH_AMX_MR * NR];
    store_tiles(n, cs, NR);
    for (size_t r = 0; r < m; r++) {
        const __m512 al = _mm512_set1_ps(alpha[r]);
        for (size_t j = 0; j < n; j += 16) {
            const __mmask16 mask = mh_mask16(n, j);
            float* cp = c + r * ldc + j;
            _mm512_mask_storeu_ps(cp, mask, _mm512_fmadd_ps(al, _mm512_maskz_loadu_ps(mask, cp), _mm512_load_ps(cs + r * NR + j)));
        }
    }
}
