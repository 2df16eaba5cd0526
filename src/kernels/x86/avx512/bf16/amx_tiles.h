/* The AMX operations of the AMX bf16 GEMMs (bf16_gemm_amx_avx512.c), by tile number: the AMX
 * intrinsics, or, in a build with MH_AMX_EMULATE (the tests' *_amxemu programs, which run the
 * same kernel source on CPUs without AMX), the plain C model of tests/support/amx_emulate.h. */
#ifndef MH_AMX_TILES_H
#define MH_AMX_TILES_H

#ifdef MH_AMX_EMULATE
#include "amx_emulate.h"
#else
#include <immintrin.h>
#define MH_TILE_CFG_STORE(cfg) _tile_storeconfig(cfg)
#define MH_TILE_CFG_LOAD(cfg) _tile_loadconfig(cfg)
#define MH_TILE_ZERO(t) _tile_zero(t)
#define MH_TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define MH_TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define MH_TILE_DPBF16(c, a, b) _tile_dpbf16ps(c, a, b)
#endif

#endif
