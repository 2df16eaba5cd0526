// The C++-only consumer (MH_CONSUMER_LANG=CXX): the installed multihead through its C header
// from C++, one MHA layer forward on a tiny input; checks the status and that the output is
// finite. Exit 0 on success.
#include <multihead.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main() {
    const int d = 16, h = 2, hd = 8, t = 5;
    std::vector<float> wq(h * hd * d), wk(h * hd * d), wv(h * hd * d), wo(d * h * hd), x(t * d), y(t * d);
    for (size_t i = 0; i < wq.size(); i++) wq[i] = wk[i] = wv[i] = wo[i] = static_cast<float>(i % 7) / 20.0f - 0.15f;
    for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i % 5) / 4.0f;

    mh_context* ctx = nullptr;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return 1;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_MHA;
    cfg.d_model = d, cfg.n_heads = h, cfg.n_kv_heads = h, cfg.head_dim = hd;
    mh_layer_weights w = {};
    w.w_q = wq.data(), w.w_k = wk.data(), w.w_v = wv.data(), w.w_o = wo.data();
    mh_layer* layer = nullptr;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &layer);
    size_t bytes = 0;
    if (st == MH_OK) st = mh_layer_forward_workspace_size(layer, 1, t, t, &bytes);
    std::vector<unsigned char> ws(bytes + 64);
    void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args args = {};
    args.batch = 1, args.n_q = t, args.query = x.data(), args.out = y.data(), args.opt = &opt;
    if (st == MH_OK) st = mh_layer_forward(layer, &args, aligned, bytes);
    bool finite = true;
    for (float v : y) finite = finite && std::isfinite(v);
    std::printf("C++ consumer: %s, output %s\n", mh_status_string(st), finite ? "finite" : "NOT finite");
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return st == MH_OK && finite ? 0 : 1;
}
