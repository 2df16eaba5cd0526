// mh_ab: two builds of libmultihead timed on the same attention call, alternated call by call in
// one process (bench/README.md, "Comparing two builds").
//
// Why in turns: on a shared host the same call's time moves by 2x from one minute to the next,
// so two builds timed one after the other compare two different machines. Calls made in turns
// see the same one, and the ratio of each adjacent pair (ABBA order, so neither build always
// runs first) is what the tool reports. Each build is loaded with dlmopen into a link-map
// namespace of its own, so both define the same symbols without clashing; the problem and its
// inputs are built once and handed to both through the core API (mh_attention), or, in the
// layer mode, as the same weights and input to an MHA/GQA layer of each (mh_layer_forward).
#include <dlfcn.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core_kv.h"

namespace {

// ------------------------------------------------------------------ options

struct Options {
    bool prefill = false, layer = false;                     // layer: prefill through mh_layer_forward
    int n = 0, m = 0, heads = 32, kv_heads = 0, dim = 128;  // n, m, kv_heads: 0 = the mode's default
    int d_model = 0;                                         // layer: 0 = heads * dim
    int causal = -1;                                         // -1: prefill 1, decode 0
    mh_dtype kv = MH_DTYPE_F32;
    bool kv_set = false;
    int token_major = -1;  // -1: the harness's layout for the mode (decode head-major, prefill token-major)
    mh_compute compute = MH_COMPUTE_F32;
    std::string isa = "auto";
    int threads = 1, rounds = 15, copies = 0;  // copies 0: enough to read K/V from memory
    int heads_kept = 0;                          // MoH routing: heads each query row keeps, 0: all (no gates)
    bool check = false;
    const char* lib[2] = {nullptr, nullptr};
};

const char kUsage[] =
    "usage: mh_ab [options] LIB_A LIB_B\n"
    "\n"
    "Times one attention call (mh_attention, the core API, or a layer's mh_layer_forward) on two\n"
    "builds of libmultihead, the builds alternated call by call (ABBA), and prints each build's\n"
    "median and the median ratio B/A of the adjacent pairs. LIB_A and LIB_B are paths to\n"
    "libmultihead.so of the same version.\n"
    "\n"
    "  --mode=decode|prefill|layer  decode: one query after M keys (default); prefill: N = M\n"
    "                         queries; layer: causal self-attention of N tokens through an MHA\n"
    "                         layer (GQA with --kv-heads), its four projections included\n"
    "  --n=N --m=M            queries and keys (decode: N 1, M 32768; prefill: N = M = 2048;\n"
    "                         layer: N 512, M = N)\n"
    "  --heads=H --kv-heads=HKV --dim=D   query heads (32), K/V heads (H), head dim (128)\n"
    "  --d-model=DM           layer: its width (H * D); seeded weights, uniform in +-1/sqrt(DM)\n"
    "  --kv=f32|f16|bf16|i8   K/V storage (decode: f16; prefill: f32); i8 with a scale per row\n"
    "  --layout=head|token    K/V head-major [HKV][M][D], heads 32 elements apart past M * D as in\n"
    "                         the library's cache (decode default), or token-major [M][HKV][D] as\n"
    "                         projections write it (prefill default): the harness's layouts\n"
    "  --causal=0|1           (prefill: 1; decode: 0, the same keys either way)\n"
    "  --compute=f32|bf16     the context's compute mode (f32)\n"
    "  --isa=NAME             auto (default), scalar, avx2, avx512, neon, sve\n"
    "  --threads=T            worker threads per call (1)\n"
    "  --rounds=R             timed pairs of calls (15)\n"
    "  --copies=C             K/V copies the calls rotate through (decode default: enough for\n"
    "                         256 MiB, so each call reads K/V from memory; prefill default: 1)\n"
    "  --heads-kept=K         MoH routing (head_gates): each query row keeps K of the H heads, a\n"
    "                         seeded choice, gate 1/K (default: every head, no gates)\n"
    "  --check                call each build once and compare the outputs bitwise instead\n"
    "The layer mode takes --n, the shape, --compute, --isa, --threads, --rounds and --check.\n"
    "\n"
    "Exit status: 0 done (--check: outputs bitwise equal), 1 outputs differ, 2 bad usage,\n"
    "3 a build could not be loaded or a call failed.\n";

bool parse_int(const char* s, int lo, int hi, int* out) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return false;
    *out = static_cast<int>(v);
    return true;
}

// "--key=value" -> value if arg names key, else nullptr.
const char* value_of(const char* arg, const char* key) {
    const size_t n = std::strlen(key);
    return std::strncmp(arg, key, n) == 0 && arg[n] == '=' ? arg + n + 1 : nullptr;
}

bool parse_dtype(const char* s, mh_dtype* out) {
    for (mh_dtype d : {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16, MH_DTYPE_I8})
        if (std::strcmp(s, mhb::dtype_name(d)) == 0) return *out = d, true;
    return false;
}

// The options that take an integer, and its range.
struct IntOption {
    const char* key;
    int lo, hi;
    int Options::*field;
};
const IntOption int_options[] = {
    {"--n", 1, 1 << 20, &Options::n},           {"--m", 1, 1 << 24, &Options::m},
    {"--heads", 1, 4096, &Options::heads},      {"--kv-heads", 1, 4096, &Options::kv_heads},
    {"--dim", 1, 4096, &Options::dim},          {"--causal", 0, 1, &Options::causal},
    {"--threads", 1, 1024, &Options::threads},  {"--rounds", 1, 1000000, &Options::rounds},
    {"--copies", 1, 4096, &Options::copies},    {"--heads-kept", 1, 4096, &Options::heads_kept},
    {"--d-model", 1, 1 << 16, &Options::d_model},
};

// 0: parsed; 2: bad usage (message printed). --help prints the usage and exits 0.
int parse(int argc, char** argv, Options* o) {
    int n_lib = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = nullptr;
        bool ok = true;
        const IntOption* io = std::begin(int_options);
        while (io != std::end(int_options) && !(v = value_of(a, io->key))) io++;
        if (io != std::end(int_options)) {
            ok = parse_int(v, io->lo, io->hi, &(o->*io->field));
        } else if (std::strcmp(a, "--help") == 0) {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (std::strcmp(a, "--check") == 0) {
            o->check = true;
        } else if ((v = value_of(a, "--mode"))) {
            o->layer = std::strcmp(v, "layer") == 0;
            o->prefill = o->layer || std::strcmp(v, "prefill") == 0;
            ok = o->prefill || std::strcmp(v, "decode") == 0;
        } else if ((v = value_of(a, "--kv"))) {
            ok = parse_dtype(v, &o->kv), o->kv_set = true;
        } else if ((v = value_of(a, "--layout"))) {
            ok = std::strcmp(v, "head") == 0 || std::strcmp(v, "token") == 0;
            o->token_major = std::strcmp(v, "token") == 0 ? 1 : 0;
        } else if ((v = value_of(a, "--compute"))) {
            ok = std::strcmp(v, "f32") == 0 || std::strcmp(v, "bf16") == 0;
            o->compute = std::strcmp(v, "bf16") == 0 ? MH_COMPUTE_BF16 : MH_COMPUTE_F32;
        } else if ((v = value_of(a, "--isa"))) {
            o->isa = v;
        } else if (a[0] == '-' || n_lib == 2) {
            ok = false;
        } else {
            o->lib[n_lib++] = a;
        }
        if (!ok) {
            std::fprintf(stderr, "mh_ab: bad argument '%s' (mh_ab --help)\n", a);
            return 2;
        }
    }
    if (n_lib != 2) {
        std::fprintf(stderr, "mh_ab: two library paths expected (mh_ab --help)\n");
        return 2;
    }
    if (o->layer && (o->m || o->kv_set || o->token_major >= 0 || o->copies || o->heads_kept || o->causal >= 0)) {
        std::fprintf(stderr, "mh_ab: --mode=layer takes no --m, --kv, --layout, --copies, --heads-kept or --causal\n");
        return 2;
    }
    if (o->d_model && !o->layer) {
        std::fprintf(stderr, "mh_ab: --d-model is for --mode=layer\n");
        return 2;
    }
    if (o->d_model == 0) o->d_model = o->heads * o->dim;
    if (o->n == 0) o->n = o->layer ? 512 : o->prefill ? (o->m ? o->m : 2048) : 1;
    if (o->m == 0) o->m = o->prefill ? o->n : 32768;
    if (o->kv_heads == 0) o->kv_heads = o->heads;
    if (!o->kv_set) o->kv = o->prefill ? MH_DTYPE_F32 : MH_DTYPE_F16;
    if (o->causal < 0) o->causal = o->prefill ? 1 : 0;
    if (o->token_major < 0) o->token_major = o->prefill ? 1 : 0;
    if (o->heads_kept > o->heads) {
        std::fprintf(stderr, "mh_ab: --heads-kept must be at most --heads\n");
        return 2;
    }
    if (o->heads % o->kv_heads) {
        std::fprintf(stderr, "mh_ab: --heads must be a multiple of --kv-heads\n");
        return 2;
    }
    return 0;
}

// ------------------------------------------------------------------ one build

// The public API of one loaded build.
struct Build {
    const char* path = nullptr;
    unsigned (*version_number)(void) = nullptr;
    const char* (*status_string)(mh_status) = nullptr;
    const char* (*isa_name)(mh_isa) = nullptr;
    mh_context_config (*context_config_default)(void) = nullptr;
    mh_status (*context_create)(const mh_context_config*, mh_context**) = nullptr;
    void (*context_destroy)(mh_context*) = nullptr;
    mh_isa (*context_isa)(const mh_context*) = nullptr;
    mh_attn_options (*attn_options_default)(void) = nullptr;
    mh_status (*workspace_size)(const mh_context*, const mh_attn_problem*, const mh_attn_options*, size_t*) = nullptr;
    mh_status (*attention)(const mh_context*, const mh_attn_problem*, const mh_attn_options*, void*, size_t) = nullptr;
    mh_layer_config (*layer_config_default)(void) = nullptr;
    mh_status (*layer_create)(const mh_context*, const mh_layer_config*, const mh_layer_weights*, mh_layer**) = nullptr;
    void (*layer_destroy)(mh_layer*) = nullptr;
    mh_status (*layer_workspace_size)(const mh_layer*, int, int, int, size_t*) = nullptr;
    mh_status (*layer_forward)(const mh_layer*, const mh_forward_args*, void*, size_t) = nullptr;
    mh_context* ctx = nullptr;
    mh_layer* layer = nullptr;  // the layer mode's
    mh_attn_options opt{};
    mh_forward_args args{};     // the layer mode's call (args.opt = &opt)
    mhb::AlignedBuffer ws;
    ~Build() {
        if (layer) layer_destroy(layer);
        if (ctx) context_destroy(ctx);
    }
};

template <class F>
bool sym(void* h, const char* name, F* out) {
    *out = reinterpret_cast<F>(dlsym(h, name));
    return *out != nullptr;
}

// Loads b->path into a namespace of its own (never unloaded: a namespace's libraries stay until
// exit) and checks that it was built from the version of the header this tool was built with,
// whose structs it passes. 0, or 3 with a message.
int load(Build* b) {
    void* h = dlmopen(LM_ID_NEWLM, b->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "mh_ab: cannot load %s: %s\n", b->path, dlerror());
        return 3;
    }
    if (!sym(h, "mh_version_number", &b->version_number) || !sym(h, "mh_status_string", &b->status_string) ||
        !sym(h, "mh_isa_name", &b->isa_name) || !sym(h, "mh_context_config_default", &b->context_config_default) ||
        !sym(h, "mh_context_create", &b->context_create) || !sym(h, "mh_context_destroy", &b->context_destroy) ||
        !sym(h, "mh_context_isa", &b->context_isa) || !sym(h, "mh_attn_options_default", &b->attn_options_default) ||
        !sym(h, "mh_attention_workspace_size", &b->workspace_size) || !sym(h, "mh_attention", &b->attention) ||
        !sym(h, "mh_layer_config_default", &b->layer_config_default) || !sym(h, "mh_layer_create", &b->layer_create) ||
        !sym(h, "mh_layer_destroy", &b->layer_destroy) ||
        !sym(h, "mh_layer_forward_workspace_size", &b->layer_workspace_size) ||
        !sym(h, "mh_layer_forward", &b->layer_forward)) {
        std::fprintf(stderr, "mh_ab: %s is not a multihead library (%s)\n", b->path, dlerror());
        return 3;
    }
    if (b->version_number() != MH_VERSION_NUMBER) {
        std::fprintf(stderr, "mh_ab: %s is multihead %u, this tool was built for %u: their structs may differ\n",
                     b->path, b->version_number(), static_cast<unsigned>(MH_VERSION_NUMBER));
        return 3;
    }
    return 0;
}

// Q, O and copies of K and V (each buffer the values, then the int8 scales: bench/core_kv.h),
// filled once from a seeded generator. The layer mode: q is the input x [N][d_model], o the
// output [N][d_model], w the weights.
struct Tensors {
    mhb::AlignedBuffer q, o;
    std::vector<mhb::AlignedBuffer> k, v;
    std::vector<float> gates;  // [N][H] with --heads-kept, else empty
    std::vector<float> w;      // layer: w_q [H*D][DM], w_k and w_v [Hkv*D][DM], w_o [DM][H*D]
};

// The build's context, options and workspace for problem p (the layer mode: its layer on t's
// weights, and the call's arguments). 0, or 3 with a message.
int prepare(Build* b, const Options& o, const mh_attn_problem& p, const Tensors& t) {
    mh_context_config c = b->context_config_default();
    c.num_threads = o.threads;
    c.compute = o.compute;
    int isa = -1;
    for (int i = 0; i < MH_ISA_COUNT; i++)
        if (o.isa == b->isa_name(static_cast<mh_isa>(i))) isa = i;
    if (isa < 0) {
        std::fprintf(stderr, "mh_ab: --isa=%s names no ISA\n", o.isa.c_str());
        return 2;
    }
    c.isa = static_cast<mh_isa>(isa);
    mh_status s = b->context_create(&c, &b->ctx);
    size_t bytes = 0;
    if (s == MH_OK) {
        b->opt = b->attn_options_default();
        b->opt.causal = o.causal;
        b->opt.head_gates = t.gates.empty() ? nullptr : t.gates.data();
    }
    if (s == MH_OK && o.layer) {
        mh_layer_config lc = b->layer_config_default();
        lc.variant = o.kv_heads == o.heads ? MH_VARIANT_MHA : MH_VARIANT_GQA;
        lc.d_model = o.d_model, lc.n_heads = o.heads, lc.n_kv_heads = o.kv_heads, lc.head_dim = o.dim;
        const size_t qw = static_cast<size_t>(o.heads) * o.dim * o.d_model;
        const size_t kw = static_cast<size_t>(o.kv_heads) * o.dim * o.d_model;
        mh_layer_weights w{};
        w.w_q = t.w.data(), w.w_k = w.w_q + qw, w.w_v = w.w_k + kw, w.w_o = w.w_v + kw;
        s = b->layer_create(b->ctx, &lc, &w, &b->layer);
        b->args.batch = 1, b->args.n_q = b->args.n_kv = o.n;
        b->args.query = t.q.as<float>(), b->args.out = t.o.as<float>(), b->args.opt = &b->opt;
        if (s == MH_OK) s = b->layer_workspace_size(b->layer, 1, o.n, o.n, &bytes);
    } else if (s == MH_OK) {
        s = b->workspace_size(b->ctx, &p, &b->opt, &bytes);
    }
    if (s != MH_OK) {
        std::fprintf(stderr, "mh_ab: %s: %s\n", b->path, b->status_string(s));
        return 3;
    }
    b->ws = mhb::AlignedBuffer(bytes);
    return 0;
}

// ------------------------------------------------------------------ the problem

// The layer mode's input, output and weights (uniform in +-1/sqrt(d_model), as nn.Linear's).
void make_layer_inputs(const Options& o, Tensors* t) {
    const size_t N = static_cast<size_t>(o.n), DM = static_cast<size_t>(o.d_model);
    const size_t HD = static_cast<size_t>(o.heads) * o.dim, KD = static_cast<size_t>(o.kv_heads) * o.dim;
    mhb::Rng rng(1);
    t->q = mhb::AlignedBuffer(N * DM * sizeof(float));
    rng.fill(t->q.as<float>(), N * DM);
    t->o = mhb::AlignedBuffer(N * DM * sizeof(float));
    std::memset(t->o.data(), 0, t->o.size());
    t->w.resize(2 * HD * DM + 2 * KD * DM);
    rng.fill(t->w.data(), t->w.size(), 1.0f / std::sqrt(static_cast<float>(DM)));
}

mh_attn_problem make_problem(const Options& o, Tensors* t) {
    const size_t D = static_cast<size_t>(o.dim), H = static_cast<size_t>(o.heads), N = static_cast<size_t>(o.n);
    const mhb::CoreKvLayout g = mhb::core_kv_layout(!o.token_major, 1, o.m, o.kv_heads, o.dim, 0, o.kv);
    size_t copies = static_cast<size_t>(o.copies);
    if (copies == 0)  // decode: K/V from memory, as a token's step meets them; prefill: one copy
        copies = o.prefill ? 1 : std::min<size_t>(4096, ((size_t{256} << 20) + 2 * g.bytes - 1) / (2 * g.bytes));
    mhb::Rng rng(1);
    t->q = mhb::AlignedBuffer(N * H * D * sizeof(float));
    rng.fill(t->q.as<float>(), N * H * D);
    t->o = mhb::AlignedBuffer(N * H * D * sizeof(float));
    std::memset(t->o.data(), 0, t->o.size());
    std::vector<float> row(static_cast<size_t>(o.kv_heads) * D);
    for (size_t c = 0; c < copies; c++)
        for (auto* x : {&t->k, &t->v}) {
            x->emplace_back(g.bytes);
            std::memset(x->back().data(), 0, g.bytes);  // the pads
            for (int j = 0; j < o.m; j++) {
                rng.fill(row.data(), row.size());
                mhb::store_token(g, x->back().data(), 0, j, row.data());
            }
        }
    if (o.heads_kept) {  // each row: heads_kept distinct heads, a partial Fisher-Yates shuffle
        t->gates.assign(N * H, 0.0f);
        std::vector<int> order(H);
        for (size_t i = 0; i < N; i++) {
            for (size_t h = 0; h < H; h++) order[h] = static_cast<int>(h);
            for (size_t j = 0; j < static_cast<size_t>(o.heads_kept); j++) {
                std::swap(order[j], order[j + rng.next_u64() % (H - j)]);
                t->gates[i * H + static_cast<size_t>(order[j])] = 1.0f / static_cast<float>(o.heads_kept);
            }
        }
    }
    mh_attn_problem p{};
    p.batch = 1, p.n_q = o.n, p.n_kv = o.m, p.n_heads = o.heads, p.n_kv_heads = o.kv_heads;
    p.head_dim_qk = p.head_dim_v = o.dim;
    const ptrdiff_t qt = static_cast<ptrdiff_t>(H * D);
    p.q = mhb::tensor_view(t->q.data(), static_cast<ptrdiff_t>(N) * qt, qt, static_cast<ptrdiff_t>(D));
    p.k = mhb::core_kv_view(g, t->k[0].data());
    p.v = mhb::core_kv_view(g, t->v[0].data());
    p.k_dtype = p.v_dtype = o.kv;
    p.o = mh_tensor_out{t->o.as<float>(), static_cast<ptrdiff_t>(N) * qt, qt, static_cast<ptrdiff_t>(D)};
    return p;
}

// The problem on copy c of K/V (the views' data and scales move together: the same offsets).
void use_copy(const Tensors& t, size_t c, mh_attn_problem* p) {
    for (int kv = 0; kv < 2; kv++) {
        mh_tensor& x = kv ? p->v : p->k;
        const char* from = static_cast<const char*>(x.data);
        const char* to = static_cast<const char*>((kv ? t.v : t.k)[c].data());
        if (x.scale) x.scale = reinterpret_cast<const float*>(to + (reinterpret_cast<const char*>(x.scale) - from));
        x.data = to;
    }
}

// ------------------------------------------------------------------ timing and report

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds of one call (the layer mode: the layer's forward), or a negative value after printing
// its error.
double timed_call(const Build& b, const mh_attn_problem& p) {
    const double t0 = now();
    const mh_status s = b.layer ? b.layer_forward(b.layer, &b.args, b.ws.data(), b.ws.size())
                                : b.attention(b.ctx, &p, &b.opt, b.ws.data(), b.ws.size());
    const double t = now() - t0;
    if (s != MH_OK) {
        std::fprintf(stderr, "mh_ab: %s: %s: %s\n", b.path, b.layer ? "mh_layer_forward" : "mh_attention",
                     b.status_string(s));
        return -1.0;
    }
    return t;
}

// The q-quantile of x (sorted in place), interpolated.
double quantile(std::vector<double>& x, double q) {
    std::sort(x.begin(), x.end());
    const double at = q * static_cast<double>(x.size() - 1);
    const size_t i = static_cast<size_t>(at);
    return i + 1 < x.size() ? x[i] + (at - static_cast<double>(i)) * (x[i + 1] - x[i]) : x[i];
}

// --check: one call of each build, outputs compared bit for bit.
int check(Build* b, const Tensors& t, mh_attn_problem p) {
    const size_t n = t.o.size() / sizeof(float);
    std::vector<float> out[2];
    for (int i = 0; i < 2; i++) {
        std::fill(t.o.as<float>(), t.o.as<float>() + n, NAN);  // an element left unwritten differs
        if (timed_call(b[i], p) < 0) return 3;
        out[i].assign(t.o.as<float>(), t.o.as<float>() + n);
    }
    size_t differ = 0;
    double max_abs = 0.0;
    mhb::ErrorAccumulator err;
    for (size_t i = 0; i < n; i++) {
        differ += std::memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
        max_abs = std::max(max_abs, std::fabs(static_cast<double>(out[1][i]) - out[0][i]));
        err.add(out[1][i], out[0][i]);
    }
    if (!differ) {
        std::printf("outputs bitwise equal (%zu elements)\n", n);
        return 0;
    }
    std::printf("outputs differ: %zu of %zu elements, max |B - A| %.3g, rel-L2 %.3g\n", differ, n, max_abs,
                err.result().rel_l2);
    return 1;
}

int run(const Options& o) {
    Build b[2];
    for (int i = 0; i < 2; i++) {  // both loaded before the inputs are filled (seconds at 32K keys)
        b[i].path = o.lib[i];
        if (int rc = load(&b[i])) return rc;
    }
    Tensors t;
    mh_attn_problem p{};
    if (o.layer) make_layer_inputs(o, &t);
    else p = make_problem(o, &t);
    for (int i = 0; i < 2; i++)
        if (int rc = prepare(&b[i], o, p, t)) return rc;
    std::printf("A  %s (isa %s)\nB  %s (isa %s)\n", b[0].path, b[0].isa_name(b[0].context_isa(b[0].ctx)), b[1].path,
                b[1].isa_name(b[1].context_isa(b[1].ctx)));
    if (o.layer)
        std::printf("layer N=%d d_model=%d H=%d Hkv=%d D=%d causal=1 compute=%s, %d thread(s)\n", o.n, o.d_model,
                    o.heads, o.kv_heads, o.dim, o.compute == MH_COMPUTE_BF16 ? "bf16" : "f32", o.threads);
    else
        std::printf("%s N=%d M=%d H=%d Hkv=%d D=%d kv=%s %s-major causal=%d compute=%s%s, %d thread(s), %zu K/V cop%s\n",
                    o.prefill ? "prefill" : "decode", o.n, o.m, o.heads, o.kv_heads, o.dim, mhb::dtype_name(o.kv),
                    o.token_major ? "token" : "head", o.causal, o.compute == MH_COMPUTE_BF16 ? "bf16" : "f32",
                    o.heads_kept ? (", heads kept " + std::to_string(o.heads_kept)).c_str() : "", o.threads,
                    t.k.size(), t.k.size() == 1 ? "y" : "ies");
    if (o.check) return check(b, t, p);
    size_t copy = 0;
    auto next_call = [&](const Build& x) {
        if (!o.layer) {
            use_copy(t, copy, &p);
            copy = (copy + 1) % t.k.size();
        }
        return timed_call(x, p);
    };
    for (int i = 0; i < 2; i++)  // a first call each: page faults, thread start-up
        if (next_call(b[i]) < 0) return 3;
    std::vector<double> times[2], ratio;
    for (int r = 0; r < o.rounds; r++) {
        double tr[2];
        for (int k = 0; k < 2; k++) {
            const int i = (r & 1) ? 1 - k : k;  // ABBA: B first in odd rounds
            if ((tr[i] = next_call(b[i])) < 0) return 3;
            times[i].push_back(tr[i]);
        }
        ratio.push_back(tr[1] / tr[0]);
    }
    std::printf("%d rounds (ABBA)   median ms     best ms   quartiles ms\n", o.rounds);
    double med[2];
    for (int i = 0; i < 2; i++) {
        const double q1 = quantile(times[i], 0.25), q3 = quantile(times[i], 0.75);
        med[i] = quantile(times[i], 0.5);
        std::printf("%c %28.3f %11.3f   %.3f-%.3f\n", 'A' + i, 1e3 * med[i], 1e3 * times[i][0], 1e3 * q1, 1e3 * q3);
    }
    const double r1 = quantile(ratio, 0.25), r3 = quantile(ratio, 0.75);
    std::printf("B/A %.3f: the median of the %d adjacent pairs' ratios (quartiles %.3f-%.3f); medians' ratio %.3f\n",
                quantile(ratio, 0.5), o.rounds, r1, r3, med[1] / med[0]);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (int rc = parse(argc, argv, &o)) return rc;
    return run(o);
}
