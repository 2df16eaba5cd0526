// The layers the harness compares: host copies of one attention layer's weights, the variant
// table, and how each variant is derived from the base (MHA) layer.
//
// Adding a variant is ONE row in variant_table() (model.cc): its name (the `variant` field of case names), the library
// family it creates, how many K/V heads it keeps for a given H, how its weights are derived
// from the base layer, and the fraction of heads it activates (FLOP counting). The suite
// (suites.cc) runs every row on every comparison shape it applies to, and report.py picks the
// new name up from the JSON with no change.
#ifndef MH_BENCH_MODEL_H
#define MH_BENCH_MODEL_H

#include <cstdint>
#include <string>
#include <vector>

#include "multihead.h"

namespace mhb {

// One attention layer in PyTorch nn.Linear layout (W[out, in], row-major), float32.
struct LayerWeights {
    int d_model = 0, kdim = 0, vdim = 0;
    int n_heads = 0, n_kv_heads = 0, head_dim = 0, head_dim_v = 0;
    bool bias = false;
    std::vector<float> wq, wk, wv, wo;  // [H*D, d], [Hkv*D, kdim], [Hkv*Dv, vdim], [d, H*Dv]
    std::vector<float> bq, bk, bv, bo;  // empty when !bias
    std::string source;                 // "seeded" or the file it came from
    // Variant-specific parts (a MoH router, CollabHead mixing, DCMHA's weight generator, ...):
    // the row's derive() fills `extra` and sets `bind`, which fills the variant's config and
    // weights structs in `parts` and points cfg->variant_config and view->variant_weights at
    // them (the weights at `extra`); either may be null. So a bound config or view is valid
    // while this object lives.
    std::vector<std::vector<float>> extra;
    void (*bind)(const LayerWeights& w, mh_layer_config* cfg, mh_layer_weights* view) = nullptr;
    struct VariantParts {
        mh_moh_config moh;
        mh_moh_weights moh_w;
        mh_overlap_config overlap;
        mh_collab_config collab;
        mh_collab_weights collab_w;
        mh_dcmha_config dcmha;
        mh_dcmha_weights dcmha_w;
    };
    mutable VariantParts parts{};

    mh_layer_weights view() const;
};

// A seeded MHA layer: weights uniform in +-1/sqrt(fan_in) (PyTorch's nn.Linear default range),
// so activations stay O(1); biases (when asked) uniform in +-0.1.
// o of an overlapping-heads config, 0 for any other variant.
int config_overlap(const mh_layer_config& c);

LayerWeights random_mha_layer(int d_model, int n_heads, int head_dim, int kdim, bool bias, uint64_t seed);

// The GQA paper's conversion (Ainslie et al. 2023, section 2.1): the K and V projection heads
// of each group of base KV heads are replaced by their mean (rows h*D..h*D+D-1 of W_K, and of
// b_K, averaged over the group; the same for V). n_kv_heads must divide base.n_kv_heads.
// Q and O are unchanged. n_kv_heads == base.n_kv_heads returns a copy.
LayerWeights pool_kv_heads(const LayerWeights& base, int n_kv_heads);

// ------------------------------------------------------------------ the variant table
struct VariantSpec {
    const char* name;        // "mha", "gqa8", ...
    mh_variant family;       // what mh_layer_create gets
    const char* derivation;  // one line for the report
    // K/V heads this variant keeps for H query heads when derived from a base layer with
    // base_kv heads; 0 when it does not apply (it would duplicate another row or cannot be
    // derived).
    int (*kv_heads)(int n_heads, int base_kv);
    // Derives the variant's weights from the base layer (kv = kv_heads(...)).
    LayerWeights (*derive)(const LayerWeights& base, int kv);
    double active_heads;     // fraction of query heads that do work (MoH < 1); FLOPs scale by it
    bool core;               // also runs on the bare attention core (mh_attention)
    // Overlapping heads: the halo o = D * halo_pct / 100 (the core mode's strided views, FLOP
    // counting); 0 for disjoint heads.
    int halo_pct = 0;
    bool self_only = false;  // serves self-attention only (no cross cases)
    bool listed_only = false;  // runs only where a suite names it (not in "every variant" lists)
};

const std::vector<VariantSpec>& variant_table();
const VariantSpec* find_variant(const std::string& name);
// The library config of a derived layer (every default resolved explicitly).
mh_layer_config layer_config(const VariantSpec& v, const LayerWeights& w);

}  // namespace mhb

#endif
