/* The AVX-512 packs' in-register 16 x 16 transposes: of 32-bit elements, shared by the f32 K
 * panels (pack_avx512.c) and the bf16 K panels, whose 32-bit elements are k-pairs
 * (bf16/pack_bf16_avx512.c); and of 16-bit elements, for f16/bf16 K widened after it. */
#ifndef MH_TRANSPOSE_AVX512_H
#define MH_TRANSPOSE_AVX512_H
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"

/* In-register transpose of a 16 x 16 block (the classic unpack / shuffle / lane-shuffle
 * sequence: 64 shuffles for 256 elements). */
MH_INLINE void mh_transpose16(__m512 r[16]) {
    __m512 t[16];
    MH_UNROLL(16) for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    MH_UNROLL(16) for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    MH_UNROLL(16) for (int h = 0; h < 16; h += 8)
        MH_UNROLL(16) for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    MH_UNROLL(16) for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* In-register transpose of a 16 x 16 block of 16-bit elements, one row per ymm: in each
 * 128-bit lane an 8 x 8 transpose of each group of 8 rows (unpacks of 16, 32, 64 bits), then
 * the groups' lanes joined: column j (16 rows) into r[j]. 64 ymm shuffles, which a core that
 * splits zmm shuffles in two (Zen 4) runs at twice the rate of mh_transpose16's. */
MH_INLINE void mh_transpose16x16_epi16(__m256i r[16]) {
    __m256i c[16];
    MH_UNROLL(16) for (int g = 0; g < 16; g += 8) {
        __m256i a[8], b[8];
        MH_UNROLL(16) for (int i = 0; i < 8; i += 2) {
            a[i] = _mm256_unpacklo_epi16(r[g + i], r[g + i + 1]);
            a[i + 1] = _mm256_unpackhi_epi16(r[g + i], r[g + i + 1]);
        }
        MH_UNROLL(16) for (int h = 0; h < 8; h += 4) { /* rows g+h .. g+h+3: columns (0,1) (2,3) (4,5) (6,7) */
            b[h] = _mm256_unpacklo_epi32(a[h], a[h + 2]);
            b[h + 1] = _mm256_unpackhi_epi32(a[h], a[h + 2]);
            b[h + 2] = _mm256_unpacklo_epi32(a[h + 1], a[h + 3]);
            b[h + 3] = _mm256_unpackhi_epi32(a[h + 1], a[h + 3]);
        }
        MH_UNROLL(16) for (int k = 0; k < 4; k++) { /* column 2k, 2k + 1 of the 8 rows (lane 1: 8 + 2k, 9 + 2k) */
            c[g + 2 * k] = _mm256_unpacklo_epi64(b[k], b[k + 4]);
            c[g + 2 * k + 1] = _mm256_unpackhi_epi64(b[k], b[k + 4]);
        }
    }
    MH_UNROLL(16) for (int k = 0; k < 8; k++) {
        r[k] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x20);
        r[8 + k] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x31);
    }
}

#endif
