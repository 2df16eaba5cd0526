#include "model.h"

#include <cmath>

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

// rows [kv*dim, (kv+1)*dim) of the pooled matrix = mean over the group's base heads.
std::vector<float> pool_rows(const std::vector<float>& m, int base_kv, int kv, int dim, size_t cols) {
    const int g = base_kv / kv;
    std::vector<float> out(static_cast<size_t>(kv) * dim * cols);
    std::vector<double> acc(cols);
    for (int j = 0; j < kv; j++) {
        for (int r = 0; r < dim; r++) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int h = j * g; h < (j + 1) * g; h++) {
                const float* row = &m[(static_cast<size_t>(h) * dim + r) * cols];
                for (size_t c = 0; c < cols; c++) acc[c] += row[c];
            }
            float* o = &out[(static_cast<size_t>(j) * dim + r) * cols];
            for (size_t c = 0; c < cols; c++) o[c] = static_cast<float>(acc[c] / g);
        }
    }
    return out;
}

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
        cfg->variant = MH_VARIANT_MOH;
        cfg->moh.router = MH_MOH_ROUTER_LEARNED;
        cfg->moh.shared_heads = hs;
        cfg->moh.top_k = k;
    }
    if (view) {
        view->moh_w_router = w.extra[0].data();
        view->moh_w_shared = hs > 1 ? w.extra[1].data() : nullptr;
        view->moh_w_stage = w.extra[2].data();
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

}  // namespace

LayerWeights pool_kv_heads(const LayerWeights& base, int n_kv_heads) {
    LayerWeights w = base;
    if (n_kv_heads == base.n_kv_heads) return w;
    w.n_kv_heads = n_kv_heads;
    w.wk = pool_rows(base.wk, base.n_kv_heads, n_kv_heads, base.head_dim, static_cast<size_t>(base.kdim));
    w.wv = pool_rows(base.wv, base.n_kv_heads, n_kv_heads, base.head_dim_v, static_cast<size_t>(base.vdim));
    if (base.bias) {
        w.bk = pool_rows(base.bk, base.n_kv_heads, n_kv_heads, base.head_dim, 1);
        w.bv = pool_rows(base.bv, base.n_kv_heads, n_kv_heads, base.head_dim_v, 1);
    }
    return w;
}

const std::vector<VariantSpec>& variant_table() {
    // One row per variant. kv_heads returns 0 where the row does not apply (e.g. gqa8 at H = 8
    // would be MHA again). MoH / overlapping heads / CollabHead / DCMHA: add their rows here.
    static const std::vector<VariantSpec> table = {
        {"mha", MH_VARIANT_MHA, "the base layer (K/V heads = query heads)",
         [](int h, int base_kv) { return base_kv == h ? h : 0; }, derive_pooled, 1.0, true},
        {"gqa8", MH_VARIANT_GQA, "8 K/V heads, each the mean of its group's base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 8); }, derive_pooled, 1.0, true},
        {"gqa4", MH_VARIANT_GQA, "4 K/V heads, each the mean of its group's base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 4); }, derive_pooled, 1.0, true},
        {"mqa", MH_VARIANT_MQA, "1 K/V head, the mean of all base K/V projection heads",
         [](int h, int base_kv) { return kv_exact(h, base_kv, 1); }, derive_pooled, 1.0, true},
        {"moh50", MH_VARIANT_MOH, "MoH, learned router (seeded): H/8 shared + top 3H/8 of the rest, 50% of heads",
         kv_moh, derive_moh<2, 8>, 0.5, true},
        {"moh75", MH_VARIANT_MOH, "MoH, learned router (seeded): H/4 shared + top H/2 of the rest, 75% of heads",
         kv_moh, derive_moh<4, 12>, 0.75, true},
        {"moh88", MH_VARIANT_MOH, "MoH, learned router (seeded): H/4 shared + top 5H/8 of the rest, 87.5% of heads",
         kv_moh, derive_moh<4, 14>, 0.875, true},
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
