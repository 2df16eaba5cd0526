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

// DCMHA on the base layer's projections, R = 2, G = 1, C = 4H, erf GELU, no W_b, with seeded
// generator weights: W1 and Wd uniform in +-1/sqrt(d) (gates tanh(x Wd) of order 0.5), W2 in
// +-0.1/sqrt(C) (low-rank factors w2 of order 0.1). The output then differs from the base
// layer's by about half (its fidelity_rel_l2): a real composition, not a near-identity one.
constexpr int kDcmhaRank = 2;

void bind_dcmha(const LayerWeights& w, mh_layer_config* cfg, mh_layer_weights* view) {
    if (cfg) cfg->dcmha = mh_dcmha_config{kDcmhaRank, 4 * w.n_heads, 1, MH_GELU_ERF, 0};
    if (view) view->dcmha_w1 = w.extra[0].data(), view->dcmha_w2 = w.extra[1].data(), view->dcmha_wd = w.extra[2].data();
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
        {"dcmha", MH_VARIANT_DCMHA, "the base layer + seeded small DCMHA generator weights (R 2, G 1, C 4H, no W_b)",
         [](int h, int base_kv) { return base_kv == h ? h : 0; }, derive_dcmha, 1.0, false, true},
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
