// mh_bench --mh_selfcheck: the harness checks itself (bench/run.sh --quick runs it first, and
// tests/run.sh runs that). Covered: the safetensors loader (round trips in F32/F16/BF16, prefix
// and metadata discovery, and every error path: bad header length, invalid JSON, unknown and
// unsupported dtypes, shape mismatches, truncated data, overlapping tensors, missing tensors,
// no head count), the GQA mean-pooling, the double oracle against the library on small layers,
// the OpenBLAS baseline against the oracle, and int8 storage (quantisation, round trip, the
// core K/V layouts, the oracle against the library on int8 K/V when it accepts them).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "blas_baseline.h"
#include "core_kv.h"
#include "int8_probe.h"
#include "model.h"
#include "reference.h"
#include "safetensors.h"

namespace {

using namespace mhb;

int g_pass = 0, g_fail = 0;

void check(bool ok, const std::string& what) {
    if (ok) g_pass++;
    else {
        g_fail++;
        std::printf("FAIL: %s\n", what.c_str());
    }
}

std::vector<uint8_t> file_of(const std::string& header, const std::vector<uint8_t>& data, long long force_len = -1) {
    std::vector<uint8_t> b;
    const uint64_t n = force_len >= 0 ? static_cast<uint64_t>(force_len) : header.size();
    for (int i = 0; i < 8; i++) b.push_back(static_cast<uint8_t>(n >> (8 * i)));
    b.insert(b.end(), header.begin(), header.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

// Loads `bytes` as a layer and expects an error containing `expect`.
void expect_error(const std::string& what, const std::vector<uint8_t>& bytes, const std::string& expect, int heads = 4) {
    SafetensorsFile f;
    std::string err;
    LayerWeights w;
    const bool ok = f.parse(bytes, what, &err) && load_attention_layer(f, heads, "", &w, &err);
    check(!ok && err.find(expect) != std::string::npos,
          what + ": expected an error containing \"" + expect + "\", got " + (ok ? "success" : "\"" + err + "\""));
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return INFINITY;
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::fmax(m, std::fabs(a[i] - b[i]) / std::fmax(1e-3, std::fabs(b[i])));
    return m;
}

void check_loader() {
    const LayerWeights w = random_mha_layer(32, 4, 8, 32, true, 11);
    // round trips
    for (const char* dt : {"F32", "F16", "BF16"}) {
        SafetensorsFile f;
        std::string err;
        LayerWeights r;
        const bool ok = f.parse(encode_attention_layer(w, dt, "model.layers.3.self_attn.", true), dt, &err) &&
                        load_attention_layer(f, 0, "", &r, &err);
        check(ok, std::string("round trip ") + dt + ": " + err);
        if (!ok) continue;
        const double tol = std::string(dt) == "F32" ? 0.0 : std::string(dt) == "F16" ? 1e-3 : 8e-3;
        check(r.n_heads == 4 && r.n_kv_heads == 4 && r.head_dim == 8 && r.d_model == 32 && r.bias,
              std::string("round trip ") + dt + ": shapes");
        check(max_rel_diff(r.wq, w.wq) <= tol && max_rel_diff(r.wk, w.wk) <= tol && max_rel_diff(r.wv, w.wv) <= tol &&
                  max_rel_diff(r.wo, w.wo) <= tol && max_rel_diff(r.bo, w.bo) <= tol,
              std::string("round trip ") + dt + ": values");
    }
    {  // a GQA checkpoint (Hkv 2 of H 4), no bias, heads given by the caller
        LayerWeights g = pool_kv_heads(random_mha_layer(32, 4, 8, 32, false, 12), 2);
        SafetensorsFile f;
        std::string err;
        LayerWeights r;
        const bool ok = f.parse(encode_attention_layer(g, "F32", "", false), "gqa", &err) &&
                        load_attention_layer(f, 4, "", &r, &err);
        check(ok && r.n_kv_heads == 2 && !r.bias && r.wk == g.wk, "GQA checkpoint: " + err);
    }

    // error paths
    const std::vector<uint8_t> data64(64, 0);
    const std::string good_q = "\"q_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]}";
    expect_error("short file", {1, 2, 3, 4, 5}, "bad header length");
    expect_error("header length past the end", file_of("{}", {}, 4096), "bad header length");
    expect_error("header length zero", file_of("{}", {}, 0), "bad header length");
    expect_error("header not JSON", file_of("{\"q_proj.weight\": [1, 2", data64), "not valid JSON");
    expect_error("header not an object", file_of("[1, 2, 3]", data64), "not a JSON object");
    expect_error("unknown dtype",
                 file_of("{\"q_proj.weight\":{\"dtype\":\"F7\",\"shape\":[4,4],\"data_offsets\":[0,64]}}", data64),
                 "unknown dtype");
    expect_error("shape vs data_offsets",
                 file_of("{\"q_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,5],\"data_offsets\":[0,64]}}", data64),
                 "shape mismatch");
    expect_error("negative shape",
                 file_of("{\"q_proj.weight\":{\"dtype\":\"F32\",\"shape\":[-4,4],\"data_offsets\":[0,64]}}", data64),
                 "shape entries");
    expect_error("truncated data", file_of("{" + good_q + "}", std::vector<uint8_t>(60, 0)), "truncated data");
    expect_error("overlap",
                 file_of("{" + good_q + ",\"k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[32,96]}}",
                         std::vector<uint8_t>(96, 0)),
                 "overlap");
    expect_error("missing tensor", file_of("{" + good_q + "}", data64), "missing tensor");
    expect_error("entry without dtype", file_of("{\"q_proj.weight\":{\"shape\":[4,4],\"data_offsets\":[0,64]}}", data64),
                 "needs a string dtype");
    {
        const LayerWeights w2 = random_mha_layer(32, 4, 8, 32, false, 13);
        std::vector<uint8_t> b = encode_attention_layer(w2, "F32", "", false);
        expect_error("truncated file", std::vector<uint8_t>(b.begin(), b.end() - 4), "truncated data");
        expect_error("no head count", b, "give --heads", 0);
        expect_error("heads not dividing rows", b, "shape mismatch", 5);
        LayerWeights bad = w2;
        bad.wo.resize(static_cast<size_t>(32) * 16);
        bad.head_dim_v = 4;  // o_proj [32, 16] while v_proj gives H*Dv = 32
        std::vector<uint8_t> tensors = encode_safetensors(
            {{"q_proj.weight", {32, 32}, w2.wq.data()}, {"k_proj.weight", {32, 32}, w2.wk.data()},
             {"v_proj.weight", {32, 32}, w2.wv.data()}, {"o_proj.weight", {32, 16}, bad.wo.data()}},
            "F32", {});
        expect_error("o_proj shape", tensors, "o_proj.weight has shape");
        const std::string f64 =
            "{\"q_proj.weight\":{\"dtype\":\"F64\",\"shape\":[4,4],\"data_offsets\":[0,128]}"
            ",\"k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[128,192]}"
            ",\"v_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[192,256]}"
            ",\"o_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[256,320]}}";
        expect_error("unsupported dtype", file_of(f64, std::vector<uint8_t>(320, 0)), "reads F32, F16 and BF16", 1);
    }
}

void check_pooling() {
    const LayerWeights base = random_mha_layer(16, 4, 4, 16, true, 21);
    const LayerWeights same = pool_kv_heads(base, 4);
    check(same.wk == base.wk && same.bv == base.bv, "pooling to H K/V heads is the identity");
    const LayerWeights mqa = pool_kv_heads(base, 1);
    double want = 0;
    for (int h = 0; h < 4; h++) want += base.wk[static_cast<size_t>(h) * 4 * 16 + 5];
    check(mqa.n_kv_heads == 1 && mqa.wk.size() == static_cast<size_t>(4) * 16 &&
              std::fabs(mqa.wk[5] - want / 4) < 1e-6,
          "pooling to 1 K/V head averages the heads");
    const LayerWeights g2 = pool_kv_heads(base, 2);
    const double want_b = (base.bk[4 * 2 + 1] + base.bk[4 * 3 + 1]) / 2.0;  // head 1 = mean of heads 2, 3
    check(std::fabs(g2.bk[4 + 1] - want_b) < 1e-6, "pooling averages the biases per group");
    check(find_variant("mha") && find_variant("gqa8") && find_variant("mqa") && !find_variant("nope"), "variant table");
    check(find_variant("gqa8")->kv_heads(8, 8) == 0 && find_variant("gqa8")->kv_heads(32, 32) == 8 &&
              find_variant("gqa4")->kv_heads(32, 8) == 4 && find_variant("mha")->kv_heads(32, 8) == 0,
          "variant applicability");
}

// A context of one thread on the default ISA; empty (a failed check) if it cannot be made.
ContextPtr one_thread_context() {
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = 1;
    mh_context* ctx = nullptr;
    check(mh_context_create(&cc, &ctx) == MH_OK, "mh_context_create");
    return ContextPtr(ctx);
}

// The oracle against the library on small layers (self and cross, bias, GQA) and the attention
// core, and the OpenBLAS baseline against the oracle.
void check_oracle() {
    const ContextPtr hold = one_thread_context();
    mh_context* ctx = hold.get();
    if (!ctx) return;
    const LayerWeights base = random_mha_layer(32, 4, 8, 24, true, 31);
    for (int kv : {4, 2}) {
        for (bool cross : {false, true}) {
            const LayerWeights w = cross ? pool_kv_heads(base, kv) : pool_kv_heads(random_mha_layer(32, 4, 8, 32, true, 32), kv);
            const mh_layer_config cfg = layer_config(*find_variant(kv == 4 ? "mha" : "gqa4"), w);
            const mh_layer_weights view = w.view();
            mh_layer* layer = nullptr;
            if (mh_layer_create(ctx, &cfg, &view, &layer) != MH_OK) {
                check(false, "mh_layer_create");
                continue;
            }
            LayerPtr lh(layer);
            const int N = 7, M = cross ? 11 : 7;
            std::vector<float> xq(static_cast<size_t>(N) * 32), xk(static_cast<size_t>(M) * w.kdim), out(xq.size());
            for (size_t i = 0; i < xq.size(); i++) xq[i] = hash_uniform(1, i);
            for (size_t i = 0; i < xk.size(); i++) xk[i] = hash_uniform(2, i);
            size_t wsb = 0;
            mh_layer_forward_workspace_size(layer, 1, N, M, &wsb);
            AlignedBuffer ws(wsb);
            mh_forward_args a{};
            a.batch = 1, a.n_q = N, a.n_kv = M, a.query = xq.data(), a.out = out.data();
            if (cross) a.key = a.value = xk.data();
            check(mh_layer_forward(layer, &a, ws.data(), wsb) == MH_OK, "mh_layer_forward");
            std::vector<int> rows;
            for (int r = 0; r < N; r++) rows.push_back(r);
            std::vector<double> ref;
            const float* kin = cross ? xk.data() : xq.data();
            ref_layer_rows(cfg, view, xq.data(), N, kin, kin, M, false, rows, ref);
            ErrorAccumulator acc;
            for (size_t i = 0; i < out.size(); i++) acc.add(out[i], ref[i]);
            const std::string what = std::string(cross ? "cross" : "self") + " layer, Hkv " + std::to_string(kv);
            check(acc.result().rel_l2 < 1e-5, "oracle vs library, " + what + ": rel_l2 " + std::to_string(acc.result().rel_l2));
            if (blas_available()) {
                std::vector<float> bo(out.size()), scratch(blas_layer_scratch_floats(w, 1, N, M));
                blas_set_threads(1);
                blas_layer_forward(w, 1, N, M, xq.data(), kin, kin, false, bo.data(), scratch.data());
                ErrorAccumulator b;
                for (size_t i = 0; i < bo.size(); i++) b.add(bo[i], ref[i]);
                check(b.result().rel_l2 < 1e-5, "openblas baseline vs oracle, " + what);
            }
        }
    }
    // causal attention core, head-major K/V with a padded stride, f16
    {
        const int N = 5, M = 9, H = 4, Hkv = 2, D = 8;
        const ptrdiff_t hs = M * D + 32;
        std::vector<float> q(static_cast<size_t>(N) * H * D), o(q.size()), kf(static_cast<size_t>(Hkv) * hs, 0.0f), vf(kf.size(), 0.0f);
        for (size_t i = 0; i < q.size(); i++) q[i] = hash_uniform(3, i);
        for (size_t i = 0; i < kf.size(); i++) kf[i] = hash_uniform(4, i), vf[i] = hash_uniform(5, i);
        std::vector<uint16_t> k(kf.size()), v(vf.size());
        store_as(MH_DTYPE_F16, kf.data(), k.data(), kf.size());
        store_as(MH_DTYPE_F16, vf.data(), v.data(), vf.size());
        mh_attn_problem p{};
        p.batch = 1, p.n_q = N, p.n_kv = M, p.n_heads = H, p.n_kv_heads = Hkv, p.head_dim_qk = p.head_dim_v = D;
        p.q = tensor_view(q.data(), N * H * D, H * D, D);
        p.k = tensor_view(k.data(), Hkv * hs, D, hs);
        p.v = tensor_view(v.data(), Hkv * hs, D, hs);
        p.k_dtype = p.v_dtype = MH_DTYPE_F16;
        p.o.data = o.data(), p.o.stride_batch = N * H * D, p.o.stride_token = H * D, p.o.stride_head = D;
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = 1;
        size_t wsb = 0;
        mh_attention_workspace_size(ctx, &p, &opt, &wsb);
        AlignedBuffer ws(wsb);
        check(mh_attention(ctx, &p, &opt, ws.data(), wsb) == MH_OK, "mh_attention");
        std::vector<double> ref;
        ref_attention(p, true, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, ref);
        ErrorAccumulator acc;
        for (size_t i = 0; i < o.size(); i++) acc.add(o[i], ref[i]);
        check(acc.result().rel_l2 < 1e-5, "oracle vs library, causal core f16: rel_l2 " + std::to_string(acc.result().rel_l2));
        std::vector<double> sub;
        ref_attention(p, true, {1, 3}, {2, 4}, sub);
        check(sub.size() == 2u * 2 * D && sub[(1 * 2 + 1) * D + 3] == ref[(4 * 4 + 3) * D + 3], "oracle sub-slice indexing");
    }
}

// int8 storage: quantisation as the library's cache does it (scale = max|x| / 127, round to
// nearest even, all-zero rows), the round trip, the core layouts (token-major and head-major
// views of the same tokens read back the same), and the oracle against the library on int8 K/V
// when the library accepts them.
void check_int8() {
    {
        const float x[6] = {127.0f, 2.5f, -2.5f, 3.5f, 0.4f, -126.6f};  // scale 1: ties to even
        int8_t q[6];
        const float sc = quantize_i8_row(x, q, 6);
        check(sc == 1.0f && q[0] == 127 && q[1] == 2 && q[2] == -2 && q[3] == 4 && q[4] == 0 && q[5] == -127,
              "int8: scale max|x|/127, rounding to nearest even");
        const float z[3] = {0.0f, -0.0f, 0.0f};
        int8_t qz[3] = {1, 1, 1};
        check(quantize_i8_row(z, qz, 3) == 0.0f && qz[0] == 0 && qz[1] == 0 && qz[2] == 0, "int8: an all-zero row has scale 0");
        std::vector<float> r(64), back(64);
        for (size_t i = 0; i < r.size(); i++) r[i] = hash_uniform(9, i) * 3.0f;
        std::vector<int8_t> qr(r.size());
        float scale = -1;
        store_as(MH_DTYPE_I8, r.data(), qr.data(), r.size(), &scale);
        load_as_float(MH_DTYPE_I8, qr.data(), back.data(), back.size(), scale);
        float amax = 0, worst = 0;
        for (size_t i = 0; i < r.size(); i++) {
            amax = std::fmax(amax, std::fabs(r[i]));
            worst = std::fmax(worst, std::fabs(back[i] - r[i]));
        }
        check(scale == amax / 127.0f && worst <= 0.5f * scale * (1 + 1e-6f) && worst > 0,
              "int8 round trip: within half a step (worst " + std::to_string(worst / scale) + " steps)");
    }
    // one seeded token row set stored in both core layouts reads back the same (int8 and f16)
    const int B = 2, M = 5, Hkv = 3, D = 8;
    for (mh_dtype dt : {MH_DTYPE_I8, MH_DTYPE_F16}) {
        const CoreKvLayout hm = core_kv_layout(true, B, M, Hkv, D, 0, dt), tm = core_kv_layout(false, B, M, Hkv, D, 0, dt);
        AlignedBuffer hb(hm.bytes), tb(tm.bytes);
        std::vector<float> row(static_cast<size_t>(Hkv) * D);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < M; j++) {
                for (size_t i = 0; i < row.size(); i++) row[i] = hash_uniform(10, (static_cast<uint64_t>(b) * M + j) * row.size() + i);
                store_token(hm, hb.data(), b, j, row.data());
                store_token(tm, tb.data(), b, j, row.data());
            }
        const mh_tensor hv = core_kv_view(hm, hb.data()), tv = core_kv_view(tm, tb.data());
        bool same = true, close = true;
        std::vector<double> a(D), c(D);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < M; j++)
                for (int h = 0; h < Hkv; h++) {
                    load_row(hv, dt, b, j, h, a.data(), D);
                    load_row(tv, dt, b, j, h, c.data(), D);
                    for (int d = 0; d < D; d++) {
                        same &= a[d] == c[d];
                        const double x = hash_uniform(10, (static_cast<uint64_t>(b) * M + j) * row.size() + static_cast<size_t>(h * D + d));
                        close &= std::fabs(a[d] - x) <= (dt == MH_DTYPE_I8 ? 0.5 / 127 * 1.0001 : 1e-3);
                    }
                }
        check(same && close, std::string("core K/V layouts: token-major and head-major ") + dtype_name(dt) + " rows read back alike");
        check(hm.token_bytes == (dt == MH_DTYPE_I8 ? static_cast<size_t>(Hkv) * (D + 4) : static_cast<size_t>(Hkv) * D * 2),
              std::string("bytes per token counted with the scales, ") + dtype_name(dt));
    }
    if (!int8_refusal().empty()) {
        std::printf("selfcheck: int8 K/V against the library skipped: the library refuses them (%s)\n", int8_refusal().c_str());
        return;
    }
    // the oracle on the dequantised values against the library, int8 decode on head-major K/V
    const ContextPtr hold = one_thread_context();
    mh_context* ctx = hold.get();
    if (!ctx) return;
    const int H = 6, N = 1, Mk = 37;
    const CoreKvLayout g = core_kv_layout(true, 1, Mk, Hkv, D, 0, MH_DTYPE_I8);
    AlignedBuffer kb(g.bytes), vb(g.bytes);
    std::memset(kb.data(), 0, g.bytes);
    std::memset(vb.data(), 0, g.bytes);
    std::vector<float> row(static_cast<size_t>(Hkv) * D), q(static_cast<size_t>(H) * D), o(q.size());
    for (int j = 0; j < Mk; j++) {
        for (size_t i = 0; i < row.size(); i++) row[i] = hash_uniform(11, j * row.size() + i);
        store_token(g, kb.data(), 0, j, row.data());
        for (size_t i = 0; i < row.size(); i++) row[i] = hash_uniform(12, j * row.size() + i);
        store_token(g, vb.data(), 0, j, row.data());
    }
    for (size_t i = 0; i < q.size(); i++) q[i] = hash_uniform(13, i);
    mh_attn_problem p{};
    p.batch = 1, p.n_q = N, p.n_kv = Mk, p.n_heads = H, p.n_kv_heads = Hkv, p.head_dim_qk = p.head_dim_v = D;
    p.q = tensor_view(q.data(), H * D, H * D, D);
    p.k = core_kv_view(g, kb.data());
    p.v = core_kv_view(g, vb.data());
    p.k_dtype = p.v_dtype = MH_DTYPE_I8;
    p.o.data = o.data(), p.o.stride_batch = p.o.stride_token = H * D, p.o.stride_head = D;
    const mh_attn_options opt = mh_attn_options_default();
    size_t wsb = 0;
    const mh_status s = mh_attention_workspace_size(ctx, &p, &opt, &wsb);
    AlignedBuffer ws(wsb);
    check(s == MH_OK && mh_attention(ctx, &p, &opt, ws.data(), wsb) == MH_OK, "mh_attention on int8 K/V");
    std::vector<double> ref;
    ref_attention(p, false, {0, 1, 2, 3, 4, 5}, {0}, ref);
    ErrorAccumulator acc;
    for (size_t i = 0; i < o.size(); i++) acc.add(o[i], ref[i]);
    check(acc.result().rel_l2 < 1e-5, "oracle vs library, int8 decode: rel_l2 " + std::to_string(acc.result().rel_l2));
}

}  // namespace

int mh_bench_selfcheck() {
    check_loader();
    check_pooling();
    check_oracle();
    check_int8();
    std::printf("selfcheck: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
