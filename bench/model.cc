#include "model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "bench_util.h"

namespace mhb {

mh_layer_weights LayerWeights::view() const {
    mh_layer_weights w{};
    w.w_q = wq.data();
    w.w_k = wk.data();
    w.w_v = wv.data();
    w.w_o = wo.data();
    if (bias) {
        w.b_q = bq.data();
        w.b_k = bk.data();
        w.b_v = bv.data();
        w.b_o = bo.data();
    }
    if (bind) bind(*this, nullptr, &w);
    return w;
}

int config_overlap(const mh_layer_config& c) {
    if (c.variant != MH_VARIANT_OVERLAP || !c.variant_config) return 0;
    return static_cast<const mh_overlap_config*>(c.variant_config)->overlap;
}

LayerWeights random_mha_layer(int d_model, int n_heads, int head_dim, int kdim, bool bias, uint64_t seed) {
    LayerWeights w;
    w.d_model = d_model;
    w.kdim = w.vdim = kdim > 0 ? kdim : d_model;
    w.n_heads = w.n_kv_heads = n_heads;
    w.head_dim = w.head_dim_v = head_dim;
    w.bias = bias;
    w.source = "seeded";
    const size_t hd = static_cast<size_t>(n_heads) * head_dim;
    Rng rng(seed);
    auto fill = [&rng](std::vector<float>& v, size_t n, double fan_in) {
        v.resize(n);
        rng.fill(v.data(), n, static_cast<float>(1.0 / std::sqrt(fan_in)));
    };
    fill(w.wq, hd * d_model, d_model);
    fill(w.wk, hd * w.kdim, w.kdim);
    fill(w.wv, hd * w.vdim, w.vdim);
    fill(w.wo, static_cast<size_t>(d_model) * hd, static_cast<double>(hd));
    if (bias) {
        for (auto* b : {&w.bq, &w.bk, &w.bv}) {
            b->resize(hd);
            rng.fill(b->data(), hd, 0.1f);
        }
        w.bo.resize(static_cast<size_t>(d_model));
        rng.fill(w.bo.data(), w.bo.size(), 0.1f);
    }
    return w;
}

namespace {

// `want` K/V heads: fewer than the query heads (else it is MHA), no more than the base has,
// pooling whole groups of base heads (want == base_kv: the base layer itself, e.g. a GQA layer
// loaded from a file).
int kv_exact(int n_heads, int base_kv, int want) {
    return want < n_heads && want <= base_kv && base_kv % want == 0 ? want : 0;
}

LayerWeights derive_pooled(const LayerWeights& base, int kv) { return pool_kv_heads(base, kv); }

// MoH rows: the base MHA layer plus a seeded learned router (W_r, W_s, W_h uniform in
// +-1/sqrt(d_model), like the base weights), H*Shared/16 shared heads and H*Active/16 heads
// active per token in all. extra = {W_r [E, d], W_s [h_s, d] (h_s > 1), W_h [2, d]}.
template <int Shared, int Active>
void bind_moh(const LayerWeights& w, mh_layer_config* cfg, mh_layer_weights* view) {
    const int hs = w.n_heads * Shared / 16, k = w.n_heads * Active / 16 - hs;
    if (cfg) {
        mh_moh_config& m = w.parts.moh;
        m = mh_moh_config_default();
        m.router = MH_MOH_ROUTER_LEARNED;
        m.shared_heads = hs;
        m.top_k = k;
        cfg->variant = MH_VARIANT_MOH;
        cfg->variant_config = &m;
    }
    if (view) {
        mh_moh_weights& r = w.parts.moh_w;
        r = mh_moh_weights_default();
        r.w_router = w.extra[0].data();
        r.w_shared = hs > 1 ? w.extra[1].data() : nullptr;
        r.w_stage = w.extra[2].data();
        view->variant_weights = &r;
    }
}

template <int Shared, int Active>
LayerWeights derive_moh(const LayerWeights& base, int) {
    LayerWeights w = base;
    const int hs = base.n_heads * Shared / 16;
    const size_t d = static_cast<size_t>(base.d_model);
    const size_t rows[3] = {static_cast<size_t>(base.n_heads - hs), static_cast<size_t>(hs > 1 ? hs : 0), 2};
    Rng rng(0x4d6f48);
    w.extra.resize(3);
    for (int i = 0; i < 3; i++) {
        w.extra[i].resize(rows[i] * d);
        rng.fill(w.extra[i].data(), w.extra[i].size(), static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
    }
    w.bind = bind_moh<Shared, Active>;
    return w;
}

// MoH derives from an MHA base only (its K/V heads are the base's).
int kv_moh(int h, int base_kv) { return base_kv == h && h % 16 == 0 ? h : 0; }

// CollabHead at D~ = H*D/4 from the base MHA layer: W~_Q, W~_K are the first D~ rows of the
// base W_Q, W_K (heads 0 .. H/4 - 1), each head mixes its own D-wide block of them cyclically
// (m_h = one-hot on block h mod H/4), the content bias is the exact one of those heads,
// C[h, :] = W_K^{h'}^T b_Q^{h'} with h' = h mod H/4 (zero without biases); V and O unchanged.
// A compressed layer (no fine-tuning), so its distance from the base layer is large by design.
void bind_collab(const LayerWeights& w, mh_layer_config* cfg, mh_layer_weights* view) {
    if (cfg) {
        w.parts.collab = mh_collab_config_default();
        w.parts.collab.collab_dim = static_cast<int>(w.wq.size()) / w.d_model;
        cfg->variant = MH_VARIANT_COLLAB;
        cfg->n_kv_heads = 0;
        cfg->variant_config = &w.parts.collab;
    }
    if (!view) return;
    view->b_q = view->b_k = nullptr;
    w.parts.collab_w = mh_collab_weights_default();
    w.parts.collab_w.mix = w.extra[0].data();
    w.parts.collab_w.content = w.extra[1].data();
    view->variant_weights = &w.parts.collab_w;
}

LayerWeights derive_collab(const LayerWeights& base, int) {
    LayerWeights w = base;
    const size_t H = static_cast<size_t>(base.n_heads), D = static_cast<size_t>(base.head_dim);
    const size_t blocks = H / 4, Dt = blocks * D, dm = static_cast<size_t>(base.d_model), kd = static_cast<size_t>(base.kdim);
    w.wq.assign(base.wq.begin(), base.wq.begin() + static_cast<ptrdiff_t>(Dt * dm));
    w.wk.assign(base.wk.begin(), base.wk.begin() + static_cast<ptrdiff_t>(Dt * kd));
    w.bq.clear(), w.bk.clear();
    std::vector<float> mix(H * Dt, 0.0f), content(H * kd, 0.0f);
    for (size_t h = 0; h < H; h++) {
        const size_t hb = h % blocks;
        for (size_t d = 0; d < D; d++) mix[h * Dt + hb * D + d] = 1.0f;
        for (size_t j = 0; base.bias && j < kd; j++) {
            double acc = 0;
            for (size_t d = 0; d < D; d++) acc += static_cast<double>(base.bq[hb * D + d]) * base.wk[(hb * D + d) * kd + j];
            content[h * kd + j] = static_cast<float>(acc);
        }
    }
    w.n_kv_heads = base.n_heads;
    w.extra = {mix, content};
    w.bind = bind_collab;
    return w;
}

// DCMHA on the base layer's projections, R = 2, G = 1, C = 4H, erf GELU, no W_b, with seeded
// generator weights: W1 and Wd uniform in +-1/sqrt(d) (gates tanh(x Wd) of order 0.5), W2 in
// +-0.1/sqrt(C) (low-rank factors w2 of order 0.1). The output then differs from the base
// layer's by about half (its dist_from_base): a real composition, not a near-identity one.
constexpr int kDcmhaRank = 2;

void bind_dcmha(const LayerWeights& w, mh_layer_config* cfg, mh_layer_weights* view) {
    if (cfg) {
        w.parts.dcmha = mh_dcmha_config{MH_VARIANT_DCMHA, kDcmhaRank, 4 * w.n_heads, 1, MH_GELU_ERF, 0};
        cfg->variant_config = &w.parts.dcmha;
    }
    if (view) {
        w.parts.dcmha_w = mh_dcmha_weights_default();
        w.parts.dcmha_w.w1 = w.extra[0].data(), w.parts.dcmha_w.w2 = w.extra[1].data();
        w.parts.dcmha_w.wd = w.extra[2].data();
        view->variant_weights = &w.parts.dcmha_w;
    }
}

LayerWeights derive_dcmha(const LayerWeights& base, int) {
    LayerWeights w = base;
    const size_t d = static_cast<size_t>(base.d_model), H = static_cast<size_t>(base.n_heads), C = 4 * H;
    const size_t sizes[3] = {d * 4 * C, 4 * C * 2 * kDcmhaRank * H, d * 4 * H};  // W1, W2, Wd
    const float amps[3] = {static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))),
                           static_cast<float>(0.1 / std::sqrt(static_cast<double>(C))),
                           static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
    Rng rng(0xdc3a);
    w.extra.resize(3);
    for (int i = 0; i < 3; i++) {
        w.extra[i].resize(sizes[i]);
        rng.fill(w.extra[i].data(), sizes[i], amps[i]);
    }
    w.bind = bind_dcmha;
    return w;
}

}  // namespace

LayerWeights pool_kv_heads(const LayerWeights& base, int n_kv_heads) {
    LayerWeights w = base;
    if (n_kv_heads == base.n_kv_heads) return w;
    mh_layer_config src = mh_layer_config_default();
    src.variant = base.n_kv_heads == base.n_heads ? MH_VARIANT_MHA : MH_VARIANT_GQA;
    src.d_model = base.d_model, src.kdim = base.kdim, src.vdim = base.vdim;
    src.n_heads = base.n_heads, src.n_kv_heads = base.n_kv_heads;
    src.head_dim = base.head_dim, src.head_dim_v = base.head_dim_v, src.bias = base.bias ? 1 : 0;
    w.n_kv_heads = n_kv_heads;
    const size_t kd = static_cast<size_t>(n_kv_heads) * base.head_dim, vd = static_cast<size_t>(n_kv_heads) * base.head_dim_v;
    w.wk.assign(kd * base.kdim, 0.0f);
    w.wv.assign(vd * base.vdim, 0.0f);
    if (base.bias) w.bk.assign(kd, 0.0f), w.bv.assign(vd, 0.0f);
    const mh_layer_weights view = base.view();
    const mh_status s = mh_convert_mha_to_gqa(&src, &view, n_kv_heads, w.wk.data(), w.wv.data(),
                                              base.bias ? w.bk.data() : nullptr, base.bias ? w.bv.data() : nullptr);
    if (s != MH_OK) throw std::invalid_argument(std::string("mh_convert_mha_to_gqa: ") + mh_status_string(s));
    return w;
}

namespace {

// Overlapping heads with o = D * Pct / 100: Q/K/V and the base layer's W_O carried over, W_O's
// head h columns placed in the middle D columns of head h's block of W' [d, H*(D + 2o)], the
// halo columns 0; the scale is the variant's default 1/sqrt(D + 2o).
template <int Pct>
LayerWeights derive_overlap(const LayerWeights& base, int) {
    LayerWeights w = base;
    const int H = base.n_heads, D = base.head_dim_v, o = D * Pct / 100, dw = D + 2 * o;
    const size_t d = static_cast<size_t>(base.d_model);
    w.wo.assign(d * static_cast<size_t>(H) * dw, 0.0f);
    for (size_t r = 0; r < d; r++)
        for (int h = 0; h < H; h++)
            std::copy_n(&base.wo[(r * H + h) * D], D, &w.wo[(r * H + h) * dw + o]);
    w.bind = [](const LayerWeights& lw, mh_layer_config* cfg, mh_layer_weights*) {
        if (!cfg) return;
        lw.parts.overlap = mh_overlap_config_default();
        lw.parts.overlap.overlap = static_cast<int>(lw.wo.size() / static_cast<size_t>(lw.d_model) / lw.n_heads - lw.head_dim) / 2;
        cfg->variant_config = &lw.parts.overlap;
    };
    return w;
}

int mha_base_only(int h, int base_kv) { return base_kv == h ? h : 0; }

// The base layer with rotate-half RoPE over all D dims (theta 10000) and QK-norm (eps 1e-6),
// the norm weights seeded in [0.9, 1.1] (extra[0] for q, extra[1] for k): what rotary and
// QK-norm add to a layer (docs/api.md, "Positions: rotary and QK-norm").
LayerWeights derive_rope(const LayerWeights& base, int) {
    LayerWeights w = base;
    Rng rng(0x20e);
    w.extra.assign(2, std::vector<float>(static_cast<size_t>(base.head_dim)));
    for (std::vector<float>& n : w.extra) {
        rng.fill(n.data(), n.size(), 0.1f);
        for (float& x : n) x += 1.0f;
    }
    w.bind = [](const LayerWeights& lw, mh_layer_config* cfg, mh_layer_weights* view) {
        if (cfg) {  // every default explicit (the harness's oracle reads them)
            cfg->rotary = mh_rotary_config{MH_ROTARY_HALF, lw.head_dim, 10000.0f, nullptr};
            cfg->qk_norm = 1, cfg->qk_norm_eps = 1e-6f;
        }
        if (view) view->q_norm = lw.extra[0].data(), view->k_norm = lw.extra[1].data();
    };
    return w;
}

}  // namespace

const std::vector<VariantSpec>& variant_table() {
    // One row per variant. kv_heads returns 0 where the row does not apply (e.g. gqa8 at H = 8
    // would be MHA again).
    static const std::vector<VariantSpec> table = {
        {"mha", MH_VARIANT_MHA, "the base layer (K/V heads = query heads)",
         [](int h, int base_kv) { return base_kv == h ? h : 0; }, derive_pooled, 1.0, true},
        {"gqa8", MH_VARIANT_GQA, "8 K/V heads, each the mean of its group's base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 8); }, derive_pooled, 1.0, true},
        {"gqa4", MH_VARIANT_GQA, "4 K/V heads, each the mean of its group's base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 4); }, derive_pooled, 1.0, true},
        {"mqa", MH_VARIANT_MQA, "1 K/V head, the mean of all base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 1); }, derive_pooled, 1.0, true},
        {"overlap25", MH_VARIANT_OVERLAP, "overlapping heads, o = D/4; W' = W_O on each head's middle D columns",
         mha_base_only, derive_overlap<25>, 1.0, true, 25},
        {"overlap50", MH_VARIANT_OVERLAP, "overlapping heads, o = D/2; W' = W_O on each head's middle D columns",
         mha_base_only, derive_overlap<50>, 1.0, true, 50},
        {"moh50", MH_VARIANT_MOH, "MoH, learned router (seeded): H/8 shared + top 3H/8 of the rest, 50% of heads",
         kv_moh, derive_moh<2, 8>, 0.5, true},
        {"moh75", MH_VARIANT_MOH, "MoH, learned router (seeded): H/4 shared + top H/2 of the rest, 75% of heads",
         kv_moh, derive_moh<4, 12>, 0.75, true},
        {"moh88", MH_VARIANT_MOH, "MoH, learned router (seeded): H/4 shared + top 5H/8 of the rest, 87.5% of heads",
         kv_moh, derive_moh<4, 14>, 0.875, true},
        {"collab", MH_VARIANT_COLLAB, "CollabHead at D~ = H*D/4: W~_Q, W~_K = first H/4 base heads, cyclic one-hot mixing",
         [](int h, int base_kv) { return base_kv == h && h % 4 == 0 ? h : 0; }, derive_collab, 1.0, false},
        {"dcmha", MH_VARIANT_DCMHA, "the base layer + seeded small DCMHA generator weights (R 2, G 1, C 4H, no W_b)",
         [](int h, int base_kv) { return base_kv == h ? h : 0; }, derive_dcmha, 1.0, false, 0, true},
        {"mha_rope", MH_VARIANT_MHA, "the base layer with rotate-half RoPE (theta 10000, all D dims) and QK-norm (seeded weights)",
         mha_base_only, derive_rope, 1.0, false, 0, false, true},
    };
    return table;
}

const VariantSpec* find_variant(const std::string& name) {
    for (const VariantSpec& v : variant_table())
        if (name == v.name) return &v;
    return nullptr;
}

mh_layer_config layer_config(const VariantSpec& v, const LayerWeights& w) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = v.family;
    // a base layer loaded with fewer K/V heads than query heads runs as GQA whatever its row
    if (c.variant == MH_VARIANT_MHA && w.n_kv_heads != w.n_heads) c.variant = MH_VARIANT_GQA;
    c.d_model = w.d_model;
    c.n_heads = w.n_heads;
    c.n_kv_heads = w.n_kv_heads;
    c.head_dim = w.head_dim;
    c.head_dim_v = w.head_dim_v;
    c.kdim = w.kdim;
    c.vdim = w.vdim;
    c.bias = w.bias ? 1 : 0;
    if (w.bind) w.bind(w, &c, nullptr);
    return c;
}

}  // namespace mhb
