/*
 * A plain C model of the AMX operations the AMX bf16 GEMMs use (src/kernels/x86/avx512/bf16/
 * amx_tiles.h includes it when the kernel source is compiled with MH_AMX_EMULATE), so the
 * tests' *_amxemu programs run that source on CPUs without AMX. It follows Intel's
 * description of the instructions: LDTILECFG (palette 1 only) sets the shapes and zeroes the
 * tiles; TILELOADD / TILESTORED move `rows` rows of `colsb` bytes, `stride` bytes apart;
 * TDPBF16PS needs C rows = A rows, A colsb / 4 = B rows, B colsb = C colsb, and adds, per C
 * element and k-pair in order, the pair's two products (bf16 inputs denormal -> 0) to the f32
 * sum, each addition an f32 FMA rounded to nearest even with a denormal result flushed to 0.
 * A tile used unconfigured, or shapes that do not fit, abort (the instruction would fault).
 * State per thread, as the hardware's. Real TDPBF16PS rounds less than this per-product
 * model (measured on a Xeon: about half its sums differ, nearer the exact ones;
 * docs/kernels.md, "AMX"), so tests on the model check bounds, not bits.
 */
#ifndef MH_AMX_EMULATE_H
#define MH_AMX_EMULATE_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mh_amx_emu_state {
    uint8_t cfg[64]; /* byte 0 palette, 16 + 2 t: colsb of tile t (uint16), 48 + t: its rows */
    uint8_t tile[8][16][64];
} mh_amx_emu_state;

static _Thread_local mh_amx_emu_state mh_amx_emu;

static inline void mh_amx_emu_fault(const char* what) {
    fprintf(stderr, "amx_emulate: %s\n", what);
    abort();
}

static inline unsigned mh_amx_emu_rows(int t) { return mh_amx_emu.cfg[48 + t]; }
static inline unsigned mh_amx_emu_colsb(int t) {
    uint16_t c;
    memcpy(&c, mh_amx_emu.cfg + 16 + 2 * t, sizeof c);
    return c;
}
static inline void mh_amx_emu_check(int t) {
    if (mh_amx_emu.cfg[0] != 1 || mh_amx_emu_rows(t) == 0 || mh_amx_emu_rows(t) > 16 || mh_amx_emu_colsb(t) == 0 ||
        mh_amx_emu_colsb(t) > 64)
        mh_amx_emu_fault("a tile used unconfigured");
}

static inline void mh_amx_emu_cfg_load(const void* cfg) {
    memcpy(mh_amx_emu.cfg, cfg, 64);
    if (mh_amx_emu.cfg[0] != 1) mh_amx_emu_fault("palette other than 1");
    memset(mh_amx_emu.tile, 0, sizeof mh_amx_emu.tile);
}

static inline void mh_amx_emu_load(int t, const void* p, size_t stride) {
    mh_amx_emu_check(t);
    memset(mh_amx_emu.tile[t], 0, sizeof mh_amx_emu.tile[t]);
    for (unsigned r = 0; r < mh_amx_emu_rows(t); r++)
        memcpy(mh_amx_emu.tile[t][r], (const char*)p + r * stride, mh_amx_emu_colsb(t));
}

static inline void mh_amx_emu_store(int t, void* p, size_t stride) {
    mh_amx_emu_check(t);
    for (unsigned r = 0; r < mh_amx_emu_rows(t); r++)
        memcpy((char*)p + r * stride, mh_amx_emu.tile[t][r], mh_amx_emu_colsb(t));
}

/* bf16 bits to f32, a denormal as (signed) zero. */
static inline float mh_amx_emu_bf16(const uint8_t* p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    if ((h & 0x7f80) == 0) h &= 0x8000;
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline float mh_amx_emu_ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

static inline void mh_amx_emu_dp(int c, int a, int b) {
    mh_amx_emu_check(c), mh_amx_emu_check(a), mh_amx_emu_check(b);
    const unsigned m = mh_amx_emu_rows(c), kp = mh_amx_emu_colsb(a) / 4, n = mh_amx_emu_colsb(c) / 4;
    if (mh_amx_emu_rows(a) != m || mh_amx_emu_rows(b) != kp || mh_amx_emu_colsb(b) != mh_amx_emu_colsb(c))
        mh_amx_emu_fault("TDPBF16PS shapes do not fit");
    for (unsigned i = 0; i < m; i++)
        for (unsigned j = 0; j < n; j++) {
            float s;
            memcpy(&s, &mh_amx_emu.tile[c][i][4 * j], sizeof s);
            for (unsigned k = 0; k < kp; k++)
                for (unsigned e = 0; e < 2; e++)
                    s = mh_amx_emu_ftz(fmaf(mh_amx_emu_bf16(&mh_amx_emu.tile[a][i][4 * k + 2 * e]),
                                            mh_amx_emu_bf16(&mh_amx_emu.tile[b][k][4 * j + 2 * e]), s));
            memcpy(&mh_amx_emu.tile[c][i][4 * j], &s, sizeof s);
        }
}

#define MH_TILE_CFG_STORE(to) memcpy(to, mh_amx_emu.cfg, 64)
#define MH_TILE_CFG_LOAD(from) mh_amx_emu_cfg_load(from)
#define MH_TILE_ZERO(t) (mh_amx_emu_check(t), memset(mh_amx_emu.tile[t], 0, sizeof mh_amx_emu.tile[t]))
#define MH_TILE_LOAD(t, p, stride) mh_amx_emu_load(t, p, stride)
#define MH_TILE_STORE(t, p, stride) mh_amx_emu_store(t, p, stride)
#define MH_TILE_DPBF16(c, a, b) mh_amx_emu_dp(c, a, b)

#endif
