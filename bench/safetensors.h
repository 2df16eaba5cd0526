// Reading one attention layer from a safetensors file (the format of Hugging Face checkpoints).
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//   8 bytes    N, unsigned little-endian: the header's length in bytes
//   N bytes    a UTF-8 JSON object: for each tensor
//                "NAME": {"dtype": "F16", "shape": [rows, cols], "data_offsets": [begin, end]}
//              plus an optional "__metadata__": {"key": "value", ...} (strings only)
//   the rest   the data section; a tensor's bytes are [begin, end) of it, row-major,
//              little-endian
// The header is parsed with cJSON (Debian libcjson-dev). Any of these is a clear error:
// a file shorter than 8 bytes or a header length beyond the file (or over 100 MB), a header that
// is not a JSON object, an entry without dtype/shape/data_offsets, a dtype the format does not
// define, a shape whose byte size differs from its data_offsets span, overlapping tensors,
// data_offsets past the end of the file (truncated data).
//
// The attention layer, in PyTorch naming (nn.Linear: weight [out_features, in_features]):
//   q_proj.weight  [H*D,    d_model]        q_proj.bias  [H*D]      (biases optional: a missing
//   k_proj.weight  [Hkv*D,  kdim]           k_proj.bias  [Hkv*D]     one reads as zeros, all
//   v_proj.weight  [Hkv*Dv, vdim]           v_proj.bias  [Hkv*Dv]    absent = no bias)
//   o_proj.weight  [d_model, H*Dv]          o_proj.bias  [d_model]
// F32, F16 or BF16 each (converted to float32). The names may carry a common prefix, e.g.
// "model.layers.0.self_attn.q_proj.weight": it is found automatically when exactly one tensor
// ends in "q_proj.weight", or given with --mh_weights_prefix. H (the number of query heads)
// cannot be read off the shapes: it comes from --heads H, else from the header's __metadata__
// ("num_attention_heads", "num_heads" or "n_heads"). D = rows(q_proj) / H, Hkv = rows(k_proj)
// / D, Dv = rows(v_proj) / Hkv. Hkv = H is an MHA layer (every variant derives from it);
// Hkv < H (a GQA checkpoint) is accepted too, and only the coarser variants derive from it.
#ifndef MH_BENCH_SAFETENSORS_H
#define MH_BENCH_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model.h"

namespace mhb {

struct TensorInfo {
    std::string dtype;           // as in the header
    std::vector<int64_t> shape;  // may be empty (a scalar)
    uint64_t begin = 0, end = 0; // in the data section
};

class SafetensorsFile {
public:
    // Parses and validates a whole file held in memory; `what` names it in errors.
    bool parse(std::vector<uint8_t> bytes, const std::string& what, std::string* err);
    bool open(const std::string& path, std::string* err);

    const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // The tensor as float32 (F32, F16 or BF16; anything else is an error).
    bool read_f32(const std::string& name, std::vector<float>* out, std::string* err) const;

private:
    std::vector<uint8_t> bytes_;
    size_t data_start_ = 0;
    std::string what_;
    std::map<std::string, TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
};

// heads <= 0: from the metadata. prefix: "" = automatic.
bool load_attention_layer(const SafetensorsFile& f, int heads, const std::string& prefix,
                          LayerWeights* out, std::string* err);
bool load_attention_layer_file(const std::string& path, int heads, const std::string& prefix,
                               LayerWeights* out, std::string* err);

// Writing (the self-check's files, and --mh_write_example): tensors in the given order, each
// stored as `dtype` ("F32", "F16" or "BF16").
struct NamedTensor {
    std::string name;
    std::vector<int64_t> shape;
    const float* data;
};
std::vector<uint8_t> encode_safetensors(const std::vector<NamedTensor>& tensors, const std::string& dtype,
                                        const std::map<std::string, std::string>& metadata);
// The layer under PyTorch names with the given prefix.
std::vector<uint8_t> encode_attention_layer(const LayerWeights& w, const std::string& dtype,
                                            const std::string& prefix, bool with_heads_metadata);

}  // namespace mhb

#endif
