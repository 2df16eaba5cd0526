// The suites: which cases --mh_quick, the default suite and --mh_long run (bench/README.md).
#include "suites.h"

#include <algorithm>
#include <thread>

#include "blas_baseline.h"
#include "model.h"

namespace mhb {
namespace {

// A model shape for the comparison at equal size: every variant at the same d_model and H.
struct Shape {
    int H, D, d_model;  // d_model 0: attention core only
};

CaseSpec make(Mode m, const std::string& v, Shape s, int n_q, int n_kv, mh_dtype dt, bool layer_api) {
    CaseSpec c;
    c.mode = m;
    c.variant = v;
    c.n_heads = s.H;
    c.head_dim = s.D;
    c.d_model = layer_api ? s.d_model : 0;
    c.n_q = n_q;
    c.n_kv = n_kv;
    c.kv_dtype = dt;
    return c;
}

class SuiteBuilder {
public:
    explicit SuiteBuilder(const SuiteOptions& o) : o_(o) {
        mh_isa_default(&best_);
        if (!mh_isa_supported(best_)) best_ = MH_ISA_SCALAR;
        t1_ = o.threads > 0 ? o.threads : 1;
        tall_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }

    // One case per applicable variant (all rows when `only` is empty).
    void variants(const CaseSpec& proto, std::vector<std::string> only = {}) {
        for (const VariantSpec& v : variant_table()) {
            if (!only.empty() && std::find(only.begin(), only.end(), v.name) == only.end()) continue;
            if (only.empty() && v.listed_only) continue;
            if (!is_layer_api(proto) && !v.core) continue;
            CaseSpec c = proto;
            c.variant = v.name;
            if (case_kv_heads(c) <= 0) continue;
            add(c);
        }
    }
    void add(CaseSpec c, mh_isa isa = MH_ISA_AUTO, int threads = 0, Impl impl = Impl::Library) {
        c.isa = isa == MH_ISA_AUTO ? best_ : isa;
        c.threads = threads > 0 ? threads : t1_;
        c.impl = impl;
        if (impl == Impl::Blas && (!blas_available() || c.kv_dtype != MH_DTYPE_F32 ||
                                   (c.mode == Mode::Decode && is_layer_api(c))))
            return;
        if (!mh_isa_supported(c.isa) || !mh_compute_supported(c.isa, c.compute)) return;
        if (case_kv_heads(c) <= 0) return;
        if (c.mode == Mode::Decode && is_layer_api(c) && c.iterations == 0) c.iterations = o_.quick ? 16 : 64;
        const std::string n = case_name(c);
        for (const CaseSpec& e : out_)
            if (case_name(e) == n) return;  // already there (e.g. --threads 1)
        out_.push_back(c);
    }
    // The SIMD ISAs this CPU and library support besides the best one (scalar is a baseline).
    std::vector<mh_isa> other_simd_isas() const {
        std::vector<mh_isa> out;
        for (int i = 1; i < MH_ISA_COUNT; i++) {
            const mh_isa isa = static_cast<mh_isa>(i);
            if (isa != MH_ISA_SCALAR && isa != best_ && mh_isa_supported(isa)) out.push_back(isa);
        }
        return out;
    }
    bool scaling() const { return o_.threads <= 0 && tall_ > 1; }
    int tall() const { return tall_; }
    std::vector<CaseSpec> take() { return std::move(out_); }

private:
    const SuiteOptions& o_;
    mh_isa best_ = MH_ISA_SCALAR;
    int t1_ = 1, tall_ = 1;
    std::vector<CaseSpec> out_;
};

const Mode P = Mode::Prefill, DEC = Mode::Decode, L = Mode::Layer, X = Mode::Cross;
const mh_dtype F32 = MH_DTYPE_F32, F16 = MH_DTYPE_F16, BF16 = MH_DTYPE_BF16, I8 = MH_DTYPE_I8;
// The rows whose caches hold plain K/V, the ones int8 K/V apply to (one overlapping-heads row).
const std::vector<std::string> kInt8Rows = {"mha", "gqa8", "mqa", "moh50", "overlap25"};

// A decode core case on a token-major cache (an engine's own [token][kv heads][D]).
CaseSpec token_major(CaseSpec c) {
    c.token_major = true;
    return c;
}

// The case in the bf16 compute mode (added only where the ISA has it).
CaseSpec bf16(CaseSpec c) {
    c.compute = MH_COMPUTE_BF16;
    return c;
}
// The variants in the bf16 compute mode's rows (every one the harness has).
const std::vector<std::string> kBf16Rows = {"mha", "gqa8", "mqa", "moh50", "overlap25", "collab", "dcmha"};

// A layer decode case on a paged KV cache of `block`-token blocks.
CaseSpec paged(CaseSpec c, int block) {
    c.kv_block = block;
    return c;
}

// The layer-API shape: the loaded layer, or the seeded one.
Shape layer_shape(const SuiteOptions& o, Shape seeded) {
    if (!o.file_layer) return seeded;
    return {o.file_layer->n_heads, o.file_layer->head_dim, o.file_layer->d_model};
}

}  // namespace

std::vector<CaseSpec> quick_suite(const SuiteOptions& o) {
    SuiteBuilder s(o);
    const Shape core{16, 32, 0};
    const Shape enc = layer_shape(o, {16, 16, 256});
    const bool self_ok = !o.file_layer || (o.file_layer->kdim == o.file_layer->d_model && o.file_layer->vdim == o.file_layer->d_model);
    s.variants(make(P, "", core, 64, 64, F32, false));
    s.variants(make(DEC, "", core, 1, 256, F16, false));
    s.add(make(DEC, "gqa8", core, 1, 256, F32, false));
    s.variants(make(DEC, "", core, 1, 256, I8, false), kInt8Rows);
    s.add(token_major(make(DEC, "mha", core, 1, 256, F16, false)));
    if (self_ok) s.variants(make(L, "", enc, 64, 64, F32, true));
    if (!o.file_layer || o.file_layer->kdim == o.file_layer->vdim) s.variants(make(X, "", enc, 16, 48, F32, true));
    if (self_ok) {
        s.add(make(DEC, "mha", enc, 1, 64, F16, true));
        s.add(paged(make(DEC, "mha", enc, 1, 64, F16, true), 64));
        s.add(make(DEC, "mha", enc, 1, 64, I8, true));
        s.add(make(DEC, "gqa4", enc, 1, 64, F16, true));
        s.add(make(DEC, "mha_rope", enc, 1, 64, F16, true));
        for (const char* v : {"mha", "mha_rope"}) s.add(make(P, v, enc, 64, 64, F32, true));
        // the projection row of report_targets.py: the layer's prefill less its core case
        s.add(make(P, "mha", enc, 64, 64, F32, false));
        s.add(make(P, "mha", enc, 64, 64, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
        s.add(make(P, "mha", enc, 64, 64, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
        s.add(bf16(make(L, "mha", enc, 64, 64, F32, true)));
    }
    s.add(bf16(make(P, "mha", core, 64, 64, F32, false)));
    // baselines and ISAs
    s.add(make(P, "mha", core, 64, 64, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", core, 1, 256, F16, false), MH_ISA_SCALAR);
    s.add(make(P, "mha", core, 64, 64, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    s.add(make(DEC, "gqa8", core, 1, 256, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    if (self_ok) s.add(make(L, "mha", enc, 64, 64, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
    for (mh_isa isa : s.other_simd_isas()) {
        s.add(make(P, "gqa8", core, 64, 64, F32, false), isa);
        s.add(make(DEC, "mha", core, 1, 256, I8, false), isa);
    }
    if (s.scaling()) {
        s.add(make(P, "gqa8", core, 64, 64, F32, false), MH_ISA_AUTO, s.tall());
        s.add(make(DEC, "gqa8", core, 1, 256, F16, false), MH_ISA_AUTO, s.tall());
    }
    return s.take();
}

// The default suite: every variant at the headline shapes, about 6 minutes on 2 cores of a
// recent x86 server. --mh_long adds the long tails (tens of minutes): the longest prompts and
// caches and the secondary shapes, whose setup (caches filled through the layer, oracles in
// double precision over every token, the derived variants' naive oracles) costs far more than
// their timed calls: 4K-token core prefill; encoder layers at 1K tokens for the variants
// outside the GQA family, at 2K/4K tokens for all, and at two more head shapes; f32 decode at
// 1K/16K; decode through the layer at 4K for every variant and at 16K/32K; DCMHA decode at the
// LLM heads (2K-32K); cross-attention with 128 queries.
std::vector<CaseSpec> default_suite(const SuiteOptions& o) {
    SuiteBuilder s(o);
    const Shape llm{32, 128, 0};                         // LLaMA-7B-like heads (core modes)
    const Shape enc = layer_shape(o, {16, 64, 1024});    // BERT-large-like layer (layer modes)
    const bool file = o.file_layer != nullptr;
    const bool self_ok = !file || (o.file_layer->kdim == o.file_layer->d_model && o.file_layer->vdim == o.file_layer->d_model);
    const bool cross_ok = !file || o.file_layer->kdim == o.file_layer->vdim;

    // 1. causal LLM prefill on the attention core
    for (int n : {512, 1024, 2048}) s.variants(make(P, "", llm, n, n, F32, false));
    if (o.long_tails) s.variants(make(P, "", llm, 4096, 4096, F32, false), {"mha", "gqa8"});
    s.add(make(P, "gqa8", llm, 2048, 2048, F16, false));  // K/V storage type in prefill
    // the compute axis: the bf16 compute mode beside f32 (pct_peak against the bf16 peak)
    for (int n : {512, 1024, 2048}) s.variants(bf16(make(P, "", llm, n, n, F32, false)), {"mha", "gqa8"});
    // MoH's core against MHA's at MoH's reference shape (H 16, D 64: d_model 1024)
    s.variants(make(P, "", Shape{16, 64, 0}, 2048, 2048, F32, false), {"mha", "moh50", "moh75", "moh88"});
    // issue 17's small prompts: 128 tokens, and 63 against 64 tokens, whose GFLOP/s per useful
    // FLOP must not fall off a cliff at the tile edge (report_targets.py sets them side by side)
    for (int n : {63, 64, 128}) s.add(make(P, "mha", Shape{8, 64, 0}, n, n, F32, false));
    // The projection GEMMs (d_model 4096, 512 tokens): the harness calls the public API only, so
    // they are timed inside causal prefill through an MHA layer, whose four projections are 97%
    // of its FLOPs; report_targets.py subtracts the core case of the same attention above
    // (prefill/mha/N512_M512_H32_D128) to give the GEMMs' own rate. OpenBLAS likewise (section 6).
    // In the bf16 compute mode too: a bf16 layer projects in bf16 (less the bf16 core case).
    if (!file) {
        s.add(make(P, "mha", Shape{32, 128, 4096}, 512, 512, F32, true));
        s.add(bf16(make(P, "mha", Shape{32, 128, 4096}, 512, 512, F32, true)));
    }

    // 2. decode against caches of 1K to 32K tokens (attention core, cache layout, cold)
    for (int m : {1024, 4096, 16384, 32768}) s.variants(make(DEC, "", llm, 1, m, F16, false));
    for (int m : o.long_tails ? std::vector<int>{1024, 4096, 16384, 32768} : std::vector<int>{4096, 32768})
        s.variants(make(DEC, "", llm, 1, m, F32, false));
    for (int m : {4096, 32768}) s.add(make(DEC, "gqa8", llm, 1, m, BF16, false));
    // bf16 compute on a bf16 cache: the direct kernels on rounded q and P, at f32 decode's speed
    s.add(bf16(make(DEC, "gqa8", llm, 1, 32768, BF16, false)));
    s.add(make(DEC, "mha", llm, 1, 32768, BF16, false));
    s.add(bf16(make(DEC, "mha", llm, 1, 32768, BF16, false)));
    // MHA decode's bandwidth at more cache lengths (issue 15's 8K and 128K keys; 128K moves
    // 2 GiB of f16 K/V per token, so it is a long tail)
    s.add(make(DEC, "mha", llm, 1, 8192, F16, false));
    if (o.long_tails)
        for (mh_dtype dt : {F16, I8}) s.add(make(DEC, "mha", llm, 1, 131072, dt, false));
    {
        CaseSpec c = make(DEC, "gqa8", llm, 1, 4096, F16, false);
        c.batch = 4;
        s.add(c);
    }
    // int8 K/V beside f16 (the rows whose caches hold plain K/V), and token-major caches (an
    // engine's own layout read in place) beside the head-major ones above
    for (int m : {4096, 32768}) s.variants(make(DEC, "", llm, 1, m, I8, false), kInt8Rows);
    for (int m : {4096, 32768}) s.add(token_major(make(DEC, "mha", llm, 1, m, F16, false)));
    s.add(token_major(make(DEC, "gqa8", llm, 1, 32768, F16, false)));
    // head dims other than 128 (GPT-2, BERT, ViTs 64; Phi-3 96; Gemma 256): MHA decode at 32K
    // keys, f16 and int8, whose bandwidth must not depend on the width
    for (int d : {64, 96, 256})
        for (mh_dtype dt : {F16, I8}) s.add(make(DEC, "mha", Shape{16, d, 0}, 1, 32768, dt, false));

    // 3. encoder layers at equal model size (d_model = H*D), N = M
    if (self_ok) {
        // every variant at 128 and 512 tokens, the GQA family (cheap oracles) also at 1024
        for (int n : o.long_tails ? std::vector<int>{128, 512, 1024, 2048, 4096} : std::vector<int>{128, 512})
            s.variants(make(L, "", enc, n, n, F32, true));
        if (!o.long_tails) s.variants(make(L, "", enc, 1024, 1024, F32, true), {"mha", "gqa8", "gqa4", "mqa"});
        s.variants(bf16(make(L, "", enc, 512, 512, F32, true)), kBf16Rows);
        if (o.long_tails && !file) {
            s.variants(make(L, "", Shape{32, 64, 2048}, 512, 512, F32, true));
            s.variants(make(L, "", Shape{8, 128, 1024}, 512, 512, F32, true));
        }
    }

    // 4. decode through the layer with its KV cache: every variant at 1K, the GQA family at 4K
    if (self_ok) {
        s.variants(make(DEC, "", enc, 1, 1024, F16, true));
        if (o.long_tails) s.variants(make(DEC, "", enc, 1, 4096, F16, true));
        else s.variants(make(DEC, "", enc, 1, 4096, F16, true), {"mha", "gqa8", "gqa4", "mqa"});
        s.add(make(DEC, "gqa4", enc, 1, 4096, F32, true));
        // bf16 compute through the layer (bf16 weights): on an f16 cache (packed tiles) and on a
        // bf16 cache (the direct kernels), beside f32 compute on the same caches
        s.variants(bf16(make(DEC, "", enc, 1, 4096, F16, true)), {"mha", "gqa8"});
        s.variants(make(DEC, "", enc, 1, 4096, BF16, true), {"mha", "gqa8"});
        s.variants(bf16(make(DEC, "", enc, 1, 4096, BF16, true)), {"mha", "gqa8"});
        for (int m : {1024, 4096}) s.add(make(DEC, "mha", enc, 1, m, I8, true));
        s.add(paged(make(DEC, "mha", enc, 1, 4096, F16, true), 256));  // against the contiguous row above
    }

    // 5. cross-attention: decoder queries over an encoder output of another length
    if (cross_ok)
        for (int n : o.long_tails ? std::vector<int>{128, 448} : std::vector<int>{448}) s.variants(make(X, "", enc, n, 1500, F32, true));

    // 6. baselines in the same run: OpenBLAS (what a C user writes), the scalar path, AVX2
    for (int n : {512, 1024})
        for (const char* v : {"mha", "gqa8"}) s.add(make(P, v, llm, n, n, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    s.add(make(P, "mha", llm, 2048, 2048, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    if (!file) s.add(make(P, "mha", Shape{32, 128, 4096}, 512, 512, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
    for (int m : {4096, 32768})
        for (const char* v : {"mha", "gqa8"}) s.add(make(DEC, v, llm, 1, m, F32, false), MH_ISA_AUTO, 0, Impl::Blas);
    if (self_ok)
        for (const char* v : {"mha", "gqa4"}) s.add(make(L, v, enc, 512, 512, F32, true), MH_ISA_AUTO, 0, Impl::Blas);
    if (cross_ok) s.add(make(X, "mha", enc, 448, 1500, F32, true), MH_ISA_AUTO, 0, Impl::Blas);

    s.add(make(P, "mha", llm, 512, 512, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", llm, 1, 4096, F32, false), MH_ISA_SCALAR);
    s.add(make(DEC, "gqa8", llm, 1, 4096, F16, false), MH_ISA_SCALAR);
    if (self_ok && !file) s.add(make(L, "mha", enc, 128, 128, F32, true), MH_ISA_SCALAR);

    for (mh_isa isa : s.other_simd_isas()) {  // e.g. avx2 on an AVX-512 machine, neon beside sve
        s.add(make(P, "gqa8", llm, 2048, 2048, F32, false), isa);
        for (int n : {512, 2048}) s.add(make(P, "mha", llm, n, n, F32, false), isa);  // issue 17's targets on this ISA
        s.add(make(DEC, "gqa8", llm, 1, 32768, F16, false), isa);
        for (int m : {4096, 32768}) {  // int8 and its f16 reference (MHA) on this ISA too
            s.add(make(DEC, "mha", llm, 1, m, F16, false), isa);
            for (const std::string& v : kInt8Rows) s.add(make(DEC, v, llm, 1, m, I8, false), isa);
        }
        if (self_ok) s.add(make(L, "gqa4", enc, 512, 512, F32, true), isa);
    }

    // DCMHA against MHA at the LLM heads through the layer (DCMHA has no bare-core form):
    // causal prefill N = 2048; --mh_long adds decode at 2K, 8K and 32K cached tokens (the
    // default suite has DCMHA's decode at the encoder shape, beside every variant). DCMHA's
    // oracle composes every query row in double precision: half a minute at 2K tokens, minutes
    // at 8K, and the cache can only be filled through the layer.
    if (!file) {
        const Shape dc{32, 128, 1024};
        for (const char* v : {"mha", "dcmha"}) {
            s.add(make(P, v, dc, 2048, 2048, F32, true));
            if (o.long_tails)
                for (int m : {2048, 8192, 32768}) s.add(make(DEC, v, dc, 1, m, F16, true));
        }
    }
    // Rotary + QK-norm against the plain layer at the LLM heads through the layer (d_model 4096):
    // a decode step at 4K cached tokens and causal prefill at N 2048
    if (!file) {
        const Shape rope{32, 128, 4096};
        for (const char* v : {"mha", "mha_rope"}) {
            s.add(make(DEC, v, rope, 1, 4096, F16, true));
            s.add(make(P, v, rope, 2048, 2048, F32, true));
        }
    }
    // MHA on contiguous and paged caches at 32K keys; the long tails add 16K, CollabHead's shared
    // keys and int8 caches at length
    if (self_ok)
        for (int m : {16384, 32768}) {
            if (!o.long_tails && m != 32768) continue;
            s.add(make(DEC, "mha", enc, 1, m, F16, true));
            s.add(paged(make(DEC, "mha", enc, 1, m, F16, true), 256));  // against the contiguous row above
            if (!o.long_tails) continue;
            s.add(make(DEC, "collab", enc, 1, m, F16, true));
            s.add(make(DEC, "mha", enc, 1, m, I8, true));
        }

    // 7. thread scaling (every processor), unless --threads fixed one count for everything
    if (s.scaling()) {
        const int t = s.tall();
        for (const char* v : {"mha", "gqa8"}) s.add(make(P, v, llm, 2048, 2048, F32, false), MH_ISA_AUTO, t);
        for (const char* v : {"mha", "gqa8"}) s.add(make(DEC, v, llm, 1, 32768, F16, false), MH_ISA_AUTO, t);
        s.add(make(DEC, "mha", llm, 1, 32768, I8, false), MH_ISA_AUTO, t);
        if (self_ok) {
            for (const char* v : {"mha", "gqa4"}) s.add(make(L, v, enc, 1024, 1024, F32, true), MH_ISA_AUTO, t);
            s.add(make(DEC, "gqa8", enc, 1, 4096, F16, true), MH_ISA_AUTO, t);
        }
        if (cross_ok) s.add(make(X, "gqa4", enc, 448, 1500, F32, true), MH_ISA_AUTO, t);
        s.add(make(P, "gqa8", llm, 1024, 1024, F32, false), MH_ISA_AUTO, t, Impl::Blas);
    }
    return s.take();
}

}  // namespace mhb
