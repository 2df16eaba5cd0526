/*
 * Decode across streams on the kernels across heads (core/driver_heads.c): the driver's path
 * for an engine's token-major cache when every stream has one query row (MHA decode).
 */
#ifndef MH_CORE_DRIVER_HEADS_H
#define MH_CORE_DRIVER_HEADS_H
#include "core/driver_call.h"

/* 1 if the decode across streams of sc->lanes (set for a batch row and key chunk) can run on
 * the kernels across heads: one query row per stream on the direct kernels, every stream
 * active over the same keys, f32 compute, no bias hook, one V per stream, and the scratch. */
int mh_drv_heads_ready(const mh_drv_call* c, const mh_drv_scratch* sc);

/* Every stream's query, pre-scaled, into sc->q_heads (stream s at s * dqk), and empty softmax
 * states in sc->m_heads, sc->l_heads, where the streams' m and l stay (every tile's, the
 * per-stream path's too) until mh_drv_heads_end. */
void mh_drv_heads_start(const mh_drv_call* c, mh_drv_scratch* sc);

/* The streams' m and l into their split partials of batch row b, chunk ci. */
void mh_drv_heads_end(const mh_drv_call* c, size_t b, size_t ci, const mh_drv_scratch* sc);

/* Key tile [j0, j0 + nc) of chunk ci of every stream of batch row b on the kernels across
 * heads, into the streams' split partials; 0 (nothing done) when the score step drops keys of
 * the tile for some stream (mh_score_tile_partial), which then takes the per-stream path. */
int mh_drv_heads_tile(const mh_drv_call* c, size_t b, size_t ci, int64_t j0, size_t nc, mh_drv_scratch* sc);

#endif
