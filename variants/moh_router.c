#include "moh_router.h"

#include <math.h>
#include <string.h>

mh_status mh_moh_check_config(const mh_layer_config* c) {
    const mh_moh_config* m = c->variant_config;
    if (m->router != MH_MOH_ROUTER_LEARNED && m->router != MH_MOH_ROUTER_NORM)
        return MH_ERR_INVALID_ARGUMENT;
    if (m->shared_heads < 0 || m->shared_heads > c->n_heads || m->top_k < 0 ||
        m->top_k > c->n_heads - m->shared_heads)
        return MH_ERR_INVALID_ARGUMENT;
    if (m->top_k == 0 && m->shared_heads != c->n_heads) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

static int uses_routed(const mh_moh_config* m) { return m->top_k > 0; }
static int uses_stage(const mh_moh_config* m) { return m->top_k > 0 && m->shared_heads > 0; }
static int uses_shared(const mh_moh_config* m) { return m->shared_heads > 1; }

mh_status mh_moh_check_weights(const mh_layer_config* c, const mh_moh_weights* w) {
    const mh_moh_config* m = c->variant_config;
    const int learned = m->router == MH_MOH_ROUTER_LEARNED;
    if ((w->w_router != NULL) != (learned && uses_routed(m)) ||
        (w->w_stage != NULL) != (learned && uses_stage(m)) ||
        (w->w_shared != NULL) != (learned && uses_shared(m)))
        return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

int mh_moh_router_rows(const mh_layer_config* c) {
    const mh_moh_config* m = c->variant_config;
    if (m->router != MH_MOH_ROUTER_LEARNED) return 0;
    return (uses_routed(m) ? c->n_heads - m->shared_heads : 0) +
           (uses_shared(m) ? m->shared_heads : 0) + (uses_stage(m) ? 2 : 0);
}

void mh_moh_router_concat(const mh_layer_config* c, const mh_moh_weights* w, float* w_cat) {
    const mh_moh_config* m = c->variant_config;
    const size_t d = (size_t)c->d_model;
    size_t row = 0;
    if (uses_routed(m)) {
        const size_t e = (size_t)(c->n_heads - m->shared_heads);
        memcpy(w_cat, w->w_router, e * d * sizeof(float));
        row += e;
    }
    if (uses_shared(m)) {
        memcpy(w_cat + row * d, w->w_shared, (size_t)m->shared_heads * d * sizeof(float));
        row += (size_t)m->shared_heads;
    }
    if (uses_stage(m)) memcpy(w_cat + row * d, w->w_stage, 2 * d * sizeof(float));
}

/* out[i] = scale * softmax(l)[i] over n values. */
static void scaled_softmax(const float* l, int n, float scale, float* out) {
    float mx = l[0], sum = 0.0f;
    for (int i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++) sum += out[i] = expf(l[i] - mx);
    for (int i = 0; i < n; i++) out[i] *= scale / sum;
}

/* out[i] = scale * softmax over the selected l[i] (0 where not selected); some selected. */
static void selected_softmax(const float* l, const unsigned char* sel, int n, float scale,
                             float* out) {
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++)
        if (sel[i] && !(l[i] <= mx)) mx = l[i];
    for (int i = 0; i < n; i++) sum += out[i] = sel[i] ? expf(l[i] - mx) : 0.0f;
    for (int i = 0; i < n; i++) out[i] *= scale / sum;
}

/* sel[i] = 1 for the k largest of l[0..n), 0 otherwise; ties (and NaNs) go to the lower
 * index. */
static void top_k(const float* l, int n, int k, unsigned char* sel) {
    memset(sel, 0, (size_t)n);
    for (int pick = 0; pick < k; pick++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!sel[i] && (best < 0 || l[i] > l[best])) best = i;
        sel[best] = 1;
    }
}

void mh_moh_route_learned(const mh_layer_config* c, const float* logits, float* g,
                          unsigned char* sel) {
    const mh_moh_config* m = c->variant_config;
    const int H = c->n_heads, hs = m->shared_heads, E = H - hs, K = m->top_k;
    memset(sel, 1, (size_t)hs);
    const float* l_shared = logits + (uses_routed(m) ? E : 0);
    if (K == 0) { /* every head shared: g = softmax(W_s x) * h_s (1 when h_s = 1) */
        if (uses_shared(m)) scaled_softmax(l_shared, hs, (float)hs, g);
        else g[0] = 1.0f;
        return;
    }
    top_k(logits, E, K, sel + hs);
    /* the top-K renormalised probabilities times K are a K-way softmax of the selected
     * logits times K */
    selected_softmax(logits, sel + hs, E, (float)K, g + hs);
    float a[2] = {1.0f, 1.0f};
    if (uses_stage(m)) scaled_softmax(l_shared + (uses_shared(m) ? hs : 0), 2, 2.0f, a);
    if (uses_shared(m)) scaled_softmax(l_shared, hs, (float)hs, g);
    else if (hs == 1) g[0] = 1.0f;
    for (int h = 0; h < hs; h++) g[h] *= a[0];
    for (int i = 0; i < E; i++) g[hs + i] *= a[1];
}

void mh_moh_route_norm(const mh_layer_config* c, const float* q, float* g, unsigned char* sel) {
    const mh_moh_config* m = c->variant_config;
    const int H = c->n_heads, hs = m->shared_heads, E = H - hs;
    const size_t D = (size_t)c->head_dim;
    float* norm2 = g + hs; /* squared norms (the same order as the norms), then the gates */
    for (int i = 0; i < E; i++) {
        const float* qh = q + (size_t)(hs + i) * D;
        float s = 0.0f;
        for (size_t d = 0; d < D; d++) s += qh[d] * qh[d];
        norm2[i] = s;
    }
    memset(sel, 1, (size_t)hs);
    top_k(norm2, E, m->top_k, sel + hs);
    for (int h = 0; h < H; h++) g[h] = sel[h] ? 1.0f : 0.0f;
}
