/* MoH: run a layer with a learned router and read its routing record (which heads each token
 * ran, with what gate, and how the load spread over the heads). Checks its own results. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "multihead.h"

enum { N = 8, D_MODEL = 16, H = 6, HEAD_DIM = 4, SHARED = 2, TOP_K = 2, A = SHARED + TOP_K };

static float* random_floats(size_t n, uint32_t* state) {
    float* p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        p[i] = (float)(*state >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

int main(void) {
    uint32_t seed = 7;
    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return 1;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_MOH, cfg.d_model = D_MODEL, cfg.n_heads = H, cfg.head_dim = HEAD_DIM;
    mh_moh_config moh = mh_moh_config_default(); /* router: learned */
    moh.shared_heads = SHARED, moh.top_k = TOP_K;
    cfg.variant_config = &moh;
    mh_layer_weights w = {0};
    mh_moh_weights router = mh_moh_weights_default();
    w.w_q = random_floats(H * HEAD_DIM * D_MODEL, &seed), w.w_k = random_floats(H * HEAD_DIM * D_MODEL, &seed);
    w.w_v = random_floats(H * HEAD_DIM * D_MODEL, &seed), w.w_o = random_floats(D_MODEL * H * HEAD_DIM, &seed);
    router.w_router = random_floats((H - SHARED) * D_MODEL, &seed); /* W_r [E, d_model] */
    router.w_shared = random_floats(SHARED * D_MODEL, &seed);       /* W_s [h_s, d_model] */
    router.w_stage = random_floats(2 * D_MODEL, &seed);             /* W_h [2, d_model] */
    w.variant_weights = &router;
    mh_layer* layer;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &layer);
    if (st != MH_OK) return fprintf(stderr, "create: %s\n", mh_status_string(st)), 1;

    float* x = random_floats(N * D_MODEL, &seed);
    float y[N * D_MODEL];
    int32_t heads[N * A];
    float gates[N * A];
    int64_t load[H];
    mh_routing_record rec = {heads, gates, load};
    mh_forward_args args = {.batch = 1, .n_q = N, .query = x, .out = y, .routing = &rec};
    size_t bytes;
    mh_layer_forward_workspace_size(layer, 1, N, N, &bytes);
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    st = mh_layer_forward(layer, &args, ws, bytes);
    if (st != MH_OK) return fprintf(stderr, "forward: %s\n", mh_status_string(st)), 1;

    int ok = 1;
    for (int t = 0; t < N; t++) {
        float shared = 0, routed = 0;
        printf("token %d:", t);
        for (int a = 0; a < A; a++) {
            printf(" head %d (g %.3f)", heads[t * A + a], gates[t * A + a]);
            if (a > 0) ok &= heads[t * A + a] > heads[t * A + a - 1]; /* ascending */
            if (a < SHARED) ok &= heads[t * A + a] == a, shared += gates[t * A + a];
            else routed += gates[t * A + a];
        }
        printf("\n");
        /* shared gates sum to 2 alpha1 h_s, routed to 2 alpha2 K, alpha1 + alpha2 = 1 */
        ok &= shared / SHARED + routed / TOP_K > 1.999f && shared / SHARED + routed / TOP_K < 2.001f;
    }
    int64_t total = 0;
    printf("load:");
    for (int h = 0; h < H; h++) printf(" %lld", (long long)load[h]), total += load[h];
    printf("  (each routed head's share of N*K = %d)\n", N * TOP_K);
    ok &= load[0] == N && load[1] == N && total == (int64_t)N * A;
    free(ws), free(x);
    free((void*)w.w_q), free((void*)w.w_k), free((void*)w.w_v), free((void*)w.w_o);
    free((void*)router.w_router), free((void*)router.w_shared), free((void*)router.w_stage);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    printf("%s\n", ok ? "routing record consistent" : "routing record INCONSISTENT");
    return ok ? 0 : 1;
}
