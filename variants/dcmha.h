/* DCMHA's private state and its dynamic-weight generator (variants/dcmha*.c). */
#ifndef MH_VARIANTS_DCMHA_H
#define MH_VARIANTS_DCMHA_H
#include "variant.h"

/* Shapes derived from the resolved config. A per-token factor row holds the four branches
 * (0 = pre/query, 1 = pre/key, 2 = post/query, 3 = post/key), each G blocks of
 * [w1 R x Hg][w2 R x Hg][dd Hg]. */
typedef struct dcmha_dims {
    int H, G, R, C, hg;
    size_t branch; /* floats of one branch: G * (2R + 1) * Hg = 2RH + H */
    size_t row;    /* floats of a factor row: 4 * branch */
    size_t z;      /* hidden + gate pre-activations per token: 4GC + 4H */
} dcmha_dims;

dcmha_dims mh_dcmha_dims(const mh_layer_config* c);

/* The DCMHA config of a resolved layer config. */
static inline const mh_dcmha_config* mh_dcmha_cfg(const mh_layer_config* c) {
    return c->variant_config;
}

typedef struct dcmha_state {
    mh_packed_matrix w1d;  /* [4GC + 4H, d]: rows (g, c, k) of W1, then (g, c, m) of Wd */
    mh_packed_matrix* w2;  /* [4G] of [2R*Hg, C], index g * 4 + c */
    float* wb;             /* [2][G][Hg][Hg] static pre then post, or NULL */
} dcmha_state;

/* Packs the generator's weights (layouts in docs/api.md); on error frees what it allocated. */
mh_status mh_dcmha_generator_create(const mh_layer* L, const mh_dcmha_weights* w, dcmha_state* s);
void mh_dcmha_generator_destroy(dcmha_state* s);
size_t mh_dcmha_generator_bytes(const mh_layer* L); /* L->ext is the state */

/* Factor rows f [rows][row] of the tokens x [rows][d_model], through z [rows][z] (scratch). */
void mh_dcmha_generate(const mh_layer* L, size_t rows, const float* x, float* z, float* f);

#endif
