#include "safetensors.h"

#include <cjson/cJSON.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "bench_util.h"

namespace mhb {
namespace {

// Every dtype the safetensors format defines, with its element size in bytes.
struct DtypeInfo {
    const char* name;
    size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
    {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},
    {"F64", 8},  {"I64", 8}, {"U64", 8},
};

size_t dtype_bytes(const std::string& d) {
    for (const DtypeInfo& i : kDtypes)
        if (d == i.name) return i.size;
    return 0;
}

struct JsonDeleter {
    void operator()(cJSON* p) const { cJSON_Delete(p); }
};
using JsonPtr = std::unique_ptr<cJSON, JsonDeleter>;

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

bool as_u64(const cJSON* n, uint64_t* out) {
    if (!cJSON_IsNumber(n)) return false;
    const double v = n->valuedouble;
    if (!(v >= 0) || v > kMaxExactInteger || std::floor(v) != v) return false;
    *out = static_cast<uint64_t>(v);
    return true;
}

std::string shape_string(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

void put_u64_le(std::vector<uint8_t>& b, uint64_t v) {
    for (int i = 0; i < 8; i++) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

bool SafetensorsFile::open(const std::string& path, std::string* err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        *err = path + ": cannot open: " + std::strerror(errno);
        return false;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) {
        *err = path + ": read error";
        return false;
    }
    return parse(std::move(bytes), path, err);
}

bool SafetensorsFile::parse(std::vector<uint8_t> bytes, const std::string& what, std::string* err) {
    bytes_ = std::move(bytes);
    what_ = what;
    tensors_.clear();
    metadata_.clear();
    auto fail = [&](const std::string& m) {
        *err = what_ + ": " + m;
        return false;
    };
    if (bytes_.size() < 8)
        return fail("bad header length: the file has " + std::to_string(bytes_.size()) +
                    " bytes, fewer than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(bytes_[static_cast<size_t>(i)]) << (8 * i);
    if (n < 2 || n > 100000000u || n > bytes_.size() - 8)
        return fail("bad header length " + std::to_string(n) + " (the file has " + std::to_string(bytes_.size() - 8) +
                    " bytes after the length field; the format allows 2 to 100000000)");
    data_start_ = 8 + static_cast<size_t>(n);
    const char* hdr = reinterpret_cast<const char*>(bytes_.data() + 8);
    JsonPtr root(cJSON_ParseWithLength(hdr, static_cast<size_t>(n)));
    if (!root) return fail("the header is not valid JSON");
    if (!cJSON_IsObject(root.get())) return fail("the header is not a JSON object");
    const uint64_t data_size = bytes_.size() - data_start_;

    std::vector<std::pair<uint64_t, std::string>> spans;  // begin, name: for the overlap check
    const cJSON* item = nullptr;
    cJSON_ArrayForEach(item, root.get()) {
        const std::string name = item->string ? item->string : "";
        if (name == "__metadata__") {
            if (!cJSON_IsObject(item)) return fail("__metadata__ is not an object");
            const cJSON* m = nullptr;
            cJSON_ArrayForEach(m, item) {
                if (!cJSON_IsString(m)) return fail("__metadata__ value \"" + std::string(m->string) + "\" is not a string");
                metadata_[m->string] = m->valuestring;
            }
            continue;
        }
        if (!cJSON_IsObject(item)) return fail("entry \"" + name + "\" is not an object");
        if (tensors_.count(name)) return fail("tensor \"" + name + "\" appears twice");
        const cJSON* dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
        const cJSON* sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
        const cJSON* off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
            return fail("tensor \"" + name + "\" needs a string dtype, a shape array and a data_offsets array");
        TensorInfo t;
        t.dtype = dt->valuestring;
        const size_t esize = dtype_bytes(t.dtype);
        if (esize == 0) return fail("tensor \"" + name + "\": unknown dtype \"" + t.dtype + "\"");
        uint64_t count = 1;
        bool overflow = false;
        const cJSON* d = nullptr;
        cJSON_ArrayForEach(d, sh) {
            uint64_t v = 0;
            if (!as_u64(d, &v)) return fail("tensor \"" + name + "\": shape entries must be integers >= 0");
            t.shape.push_back(static_cast<int64_t>(v));
            if (v && count > UINT64_MAX / v) overflow = true;
            count *= v;
        }
        if (cJSON_GetArraySize(off) != 2 || !as_u64(cJSON_GetArrayItem(off, 0), &t.begin) ||
            !as_u64(cJSON_GetArrayItem(off, 1), &t.end) || t.end < t.begin)
            return fail("tensor \"" + name + "\": data_offsets must be [begin, end] with 0 <= begin <= end");
        if (overflow || count > UINT64_MAX / esize || count * esize != t.end - t.begin)
            return fail("shape mismatch: tensor \"" + name + "\" of shape " + shape_string(t.shape) + " and dtype " +
                        t.dtype + " needs " + (overflow ? std::string("too many") : std::to_string(count * esize)) +
                        " bytes, its data_offsets span " + std::to_string(t.end - t.begin));
        if (t.end > data_size)
            return fail("truncated data: tensor \"" + name + "\" ends at byte " + std::to_string(t.end) +
                        " of the data section, which holds " + std::to_string(data_size) + " bytes");
        spans.push_back({t.begin, name});
        tensors_[name] = t;
    }
    std::sort(spans.begin(), spans.end());
    uint64_t covered = 0;  // end of the tensors so far (empty tensors take no bytes)
    std::string last;
    for (const auto& sp : spans) {
        const TensorInfo& t = tensors_[sp.second];
        if (t.end == t.begin) continue;
        if (t.begin < covered) return fail("tensors \"" + last + "\" and \"" + sp.second + "\" overlap");
        covered = t.end;
        last = sp.second;
    }
    return true;
}

bool SafetensorsFile::read_f32(const std::string& name, std::vector<float>* out, std::string* err) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
        *err = what_ + ": no tensor \"" + name + "\"";
        return false;
    }
    const TensorInfo& t = it->second;
    mh_dtype dt;
    if (t.dtype == "F32") dt = MH_DTYPE_F32;
    else if (t.dtype == "F16") dt = MH_DTYPE_F16;
    else if (t.dtype == "BF16") dt = MH_DTYPE_BF16;
    else {
        *err = what_ + ": tensor \"" + name + "\" has dtype " + t.dtype + "; the harness reads F32, F16 and BF16";
        return false;
    }
    const size_t n = static_cast<size_t>((t.end - t.begin) / dtype_size(dt));
    out->resize(n);
    // The data section need not be aligned: copy through an aligned buffer. Little-endian host.
    std::vector<uint8_t> tmp(bytes_.begin() + static_cast<ptrdiff_t>(data_start_ + t.begin),
                             bytes_.begin() + static_cast<ptrdiff_t>(data_start_ + t.end));
    if (dt == MH_DTYPE_F32) std::memcpy(out->data(), tmp.data(), n * 4);
    else {
        std::vector<uint16_t> h(n);
        std::memcpy(h.data(), tmp.data(), n * 2);
        load_as_float(dt, h.data(), out->data(), n);
    }
    return true;
}

bool load_attention_layer(const SafetensorsFile& f, int heads, const std::string& prefix_in, LayerWeights* out,
                          std::string* err) {
    std::string prefix = prefix_in;
    const auto& ts = f.tensors();
    if (prefix.empty() && !ts.count("q_proj.weight")) {
        std::vector<std::string> found;
        for (const auto& kv : ts) {
            const std::string& n = kv.first;
            const std::string suf = "q_proj.weight";
            if (n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0)
                found.push_back(n.substr(0, n.size() - suf.size()));
        }
        if (found.size() > 1) {
            *err = "several tensors end in q_proj.weight (e.g. \"" + found[0] + "q_proj.weight\" and \"" + found[1] +
                   "q_proj.weight\"): choose one layer with --mh_weights_prefix";
            return false;
        }
        if (found.size() == 1) prefix = found[0];
    }
    auto need2d = [&](const std::string& base, std::vector<int64_t>* shape) {
        auto it = ts.find(prefix + base);
        if (it == ts.end()) {
            *err = "missing tensor \"" + prefix + base + "\" (an attention layer needs q_proj, k_proj, v_proj and o_proj weights)";
            return false;
        }
        if (it->second.shape.size() != 2 || it->second.shape[0] <= 0 || it->second.shape[1] <= 0) {
            *err = "shape mismatch: \"" + prefix + base + "\" has shape " + shape_string(it->second.shape) +
                   ", expected [out_features, in_features]";
            return false;
        }
        *shape = it->second.shape;
        return true;
    };
    std::vector<int64_t> sq, sk, sv, so;
    if (!need2d("q_proj.weight", &sq) || !need2d("k_proj.weight", &sk) || !need2d("v_proj.weight", &sv) ||
        !need2d("o_proj.weight", &so))
        return false;
    if (heads <= 0) {
        for (const char* key : {"num_attention_heads", "num_heads", "n_heads"}) {
            auto it = f.metadata().find(key);
            if (it != f.metadata().end()) {
                heads = std::atoi(it->second.c_str());
                break;
            }
        }
        if (heads <= 0) {
            *err = "the number of query heads is not in the file's __metadata__ (num_attention_heads): give --heads H";
            return false;
        }
    }
    auto mismatch = [&](const std::string& m) {
        *err = "shape mismatch: " + m;
        return false;
    };
    const int64_t d_model = sq[1];
    if (sq[0] % heads) return mismatch("q_proj.weight has " + std::to_string(sq[0]) + " rows, not a multiple of H = " + std::to_string(heads));
    const int64_t D = sq[0] / heads;
    if (sk[0] % D || sk[0] / D < 1) return mismatch("k_proj.weight has " + std::to_string(sk[0]) + " rows, not a multiple of D = " + std::to_string(D));
    const int64_t hkv = sk[0] / D;
    if (heads % hkv) return mismatch("k_proj.weight gives " + std::to_string(hkv) + " K/V heads, which do not divide H = " + std::to_string(heads));
    if (sv[0] % hkv) return mismatch("v_proj.weight has " + std::to_string(sv[0]) + " rows, not a multiple of Hkv = " + std::to_string(hkv));
    const int64_t Dv = sv[0] / hkv;
    if (so[0] != d_model || so[1] != heads * Dv)
        return mismatch("o_proj.weight has shape " + shape_string(so) + ", expected [" + std::to_string(d_model) + ", " +
                        std::to_string(heads * Dv) + "] (d_model, H*Dv)");
    if (d_model > (1 << 20) || sk[1] > (1 << 20) || sv[1] > (1 << 20)) return mismatch("layer wider than 2^20");

    LayerWeights w;
    w.d_model = static_cast<int>(d_model);
    w.kdim = static_cast<int>(sk[1]);
    w.vdim = static_cast<int>(sv[1]);
    w.n_heads = heads;
    w.n_kv_heads = static_cast<int>(hkv);
    w.head_dim = static_cast<int>(D);
    w.head_dim_v = static_cast<int>(Dv);
    if (!f.read_f32(prefix + "q_proj.weight", &w.wq, err) || !f.read_f32(prefix + "k_proj.weight", &w.wk, err) ||
        !f.read_f32(prefix + "v_proj.weight", &w.wv, err) || !f.read_f32(prefix + "o_proj.weight", &w.wo, err))
        return false;
    struct B {
        const char* name;
        std::vector<float>* dst;
        int64_t len;
    } biases[] = {{"q_proj.bias", &w.bq, sq[0]}, {"k_proj.bias", &w.bk, sk[0]}, {"v_proj.bias", &w.bv, sv[0]}, {"o_proj.bias", &w.bo, d_model}};
    for (const B& b : biases) {
        auto it = ts.find(prefix + b.name);
        if (it == ts.end()) continue;
        if (it->second.shape.size() != 1 || it->second.shape[0] != b.len)
            return mismatch("\"" + prefix + b.name + "\" has shape " + shape_string(it->second.shape) + ", expected [" +
                            std::to_string(b.len) + "]");
        if (!f.read_f32(prefix + b.name, b.dst, err)) return false;
        w.bias = true;
    }
    if (w.bias)
        for (const B& b : biases)
            if (b.dst->empty()) b.dst->assign(static_cast<size_t>(b.len), 0.0f);
    *out = std::move(w);
    return true;
}

bool load_attention_layer_file(const std::string& path, int heads, const std::string& prefix, LayerWeights* out,
                               std::string* err) {
    SafetensorsFile f;
    if (!f.open(path, err)) return false;
    if (!load_attention_layer(f, heads, prefix, out, err)) {
        if (err->rfind(path, 0) != 0) *err = path + ": " + *err;
        return false;
    }
    out->source = path;
    return true;
}

std::vector<uint8_t> encode_safetensors(const std::vector<NamedTensor>& tensors, const std::string& dtype,
                                        const std::map<std::string, std::string>& metadata) {
    const mh_dtype dt = dtype == "F16" ? MH_DTYPE_F16 : dtype == "BF16" ? MH_DTYPE_BF16 : MH_DTYPE_F32;
    const size_t es = dtype_size(dt);
    JsonPtr root(cJSON_CreateObject());
    if (!metadata.empty()) {
        cJSON* m = cJSON_CreateObject();
        for (const auto& kv : metadata) cJSON_AddStringToObject(m, kv.first.c_str(), kv.second.c_str());
        cJSON_AddItemToObject(root.get(), "__metadata__", m);
    }
    std::vector<uint8_t> data;
    for (const NamedTensor& t : tensors) {
        size_t n = 1;
        cJSON* shape = cJSON_CreateArray();
        for (int64_t s : t.shape) {
            n *= static_cast<size_t>(s);
            cJSON_AddItemToArray(shape, cJSON_CreateNumber(static_cast<double>(s)));
        }
        cJSON* e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", dtype.c_str());
        cJSON_AddItemToObject(e, "shape", shape);
        cJSON* off = cJSON_CreateArray();
        cJSON_AddItemToArray(off, cJSON_CreateNumber(static_cast<double>(data.size())));
        cJSON_AddItemToArray(off, cJSON_CreateNumber(static_cast<double>(data.size() + n * es)));
        cJSON_AddItemToObject(e, "data_offsets", off);
        cJSON_AddItemToObject(root.get(), t.name.c_str(), e);
        const size_t at = data.size();
        data.resize(at + n * es);
        store_as(dt, t.data, data.data() + at, n);
    }
    char* text = cJSON_PrintUnformatted(root.get());
    std::string hdr = text ? text : "{}";
    cJSON_free(text);
    while (hdr.size() % 8) hdr += ' ';  // the format pads the header with spaces to 8 bytes
    std::vector<uint8_t> out;
    put_u64_le(out, hdr.size());
    out.insert(out.end(), hdr.begin(), hdr.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

std::vector<uint8_t> encode_attention_layer(const LayerWeights& w, const std::string& dtype, const std::string& prefix,
                                            bool with_heads_metadata) {
    const int64_t hd = static_cast<int64_t>(w.n_heads) * w.head_dim, kd = static_cast<int64_t>(w.n_kv_heads) * w.head_dim;
    const int64_t vd = static_cast<int64_t>(w.n_kv_heads) * w.head_dim_v, od = static_cast<int64_t>(w.n_heads) * w.head_dim_v;
    std::vector<NamedTensor> t = {
        {prefix + "q_proj.weight", {hd, w.d_model}, w.wq.data()},
        {prefix + "k_proj.weight", {kd, w.kdim}, w.wk.data()},
        {prefix + "v_proj.weight", {vd, w.vdim}, w.wv.data()},
        {prefix + "o_proj.weight", {w.d_model, od}, w.wo.data()},
    };
    if (w.bias) {
        t.push_back({prefix + "q_proj.bias", {hd}, w.bq.data()});
        t.push_back({prefix + "k_proj.bias", {kd}, w.bk.data()});
        t.push_back({prefix + "v_proj.bias", {vd}, w.bv.data()});
        t.push_back({prefix + "o_proj.bias", {w.d_model}, w.bo.data()});
    }
    std::map<std::string, std::string> meta;
    if (with_heads_metadata) meta["num_attention_heads"] = std::to_string(w.n_heads);
    return encode_safetensors(t, dtype, meta);
}

}  // namespace mhb
