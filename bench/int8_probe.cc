#include "int8_probe.h"

#include <cstdint>
#include <vector>

#include "bench_util.h"

namespace mhb {

const std::string& int8_refusal() {
    static const std::string reason = [] {
        const int D = 16;
        std::vector<float> q(D, 0.5f), o(D), scale(1, 1.0f / 127);
        std::vector<int8_t> kv(D, 1);
        mh_attn_problem p{};
        p.batch = p.n_q = p.n_kv = p.n_heads = p.n_kv_heads = 1;
        p.head_dim_qk = p.head_dim_v = D;
        p.q = tensor_view(q.data(), D, D, D);
        p.k = tensor_view(kv.data(), D, D, D);
        p.k.scale = scale.data(), p.k.scale_stride_batch = p.k.scale_stride_token = p.k.scale_stride_head = 1;
        p.v = p.k;
        p.k_dtype = p.v_dtype = MH_DTYPE_I8;
        p.o.data = o.data(), p.o.stride_batch = p.o.stride_token = p.o.stride_head = D;
        mh_context* ctx = nullptr;
        mh_context_config cfg = mh_context_config_default();
        cfg.num_threads = 1;
        mh_status s = mh_context_create(&cfg, &ctx);
        if (s != MH_OK) return std::string("mh_context_create: ") + mh_status_string(s);
        ContextPtr hold(ctx);
        const mh_attn_options opt = mh_attn_options_default();
        size_t ws = 0;
        s = mh_attention_workspace_size(ctx, &p, &opt, &ws);
        if (s != MH_OK) return std::string("mh_attention_workspace_size: ") + mh_status_string(s);
        AlignedBuffer w(ws);
        s = mh_attention(ctx, &p, &opt, w.data(), ws);
        return s == MH_OK ? std::string() : std::string("mh_attention: ") + mh_status_string(s);
    }();
    return reason;
}

}  // namespace mhb
