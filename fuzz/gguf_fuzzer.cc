// libFuzzer: any bytes as a .gguf file. Opening either fails with rlx::Error
// or gives metadata and tensors whose bytes all lie inside the file, and
// every dequantizable tensor dequantizes to its element count. The LLaMA
// metadata reader, the BERT encoder's (config, pooling, tensor checks
// against its graph) and the GGUF tokenizer loaders then read the same
// file: each fails with rlx::Error or gives sizes inside LlamaLimits /
// BertLimits and a tokenizer whose ids lie inside its vocabulary.
#include <cmath>
#include <cstdlib>

#include "fuzz_files.h"
#include "models/bert.h"
#include "models/bert_gguf.h"
#include "models/gguf.h"
#include "models/gguf_held_quant.h"
#include "models/llama.h"
#include "models/llama_limits.h"
#include "rlx/error.h"
#include "tokenizers/bpe.h"
#include "tokenizers/spm.h"
#include "tokenizers/wordpiece_text.h"

namespace {

void check_llama_config(const rlx::GgufFile& f) {
  const rlx::LlamaConfig c = rlx::llama_config_from_gguf(f);
  const rlx::LlamaLimits L;
  if (c.num_layers < 1 || c.num_layers > L.layers || c.hidden_size < 1 || c.hidden_size > L.hidden_size ||
      c.num_heads < 1 || c.num_heads > L.heads || c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0 ||
      c.head_dim < 1 || c.head_dim > L.head_dim || c.vocab_size < 1 || c.vocab_size > L.vocab ||
      c.max_positions < 1 || c.max_positions > L.positions || !(c.rms_eps > 0.f && c.rms_eps < 1.f) ||
      !(c.rope_theta > 0.f) || !std::isfinite(c.rope_theta))
    std::abort();
}

// A "bert" GGUF: its config within BertLimits, its pooling, and its
// tensors checked against the graph the config builds (small configs only:
// a graph of the largest sizes takes too long to build per input).
void check_bert(const std::string& path) {
  rlx::BertGguf w(path);
  const rlx::BertConfig& c = w.config();
  const rlx::BertLimits L;
  if (c.num_hidden_layers < 1 || c.num_hidden_layers > L.layers || c.hidden_size < 1 || c.hidden_size > L.hidden ||
      c.num_attention_heads < 1 || c.hidden_size % c.num_attention_heads != 0 || c.vocab_size < 1 ||
      c.vocab_size > L.vocab || c.intermediate_size < 1 || c.intermediate_size > L.intermediate ||
      c.max_position_embeddings < 1 || c.max_position_embeddings > L.positions || c.type_vocab_size < 0 ||
      !(c.layer_norm_eps > 0.f && c.layer_norm_eps <= 1.f))
    std::abort();
  (void)rlx::bert_pooling_from_gguf(w.file());
  w.check_sizes(c);
  if (c.num_hidden_layers <= 8 && c.max_position_embeddings >= 2)
    w.validate(rlx::build_bert_graph(c, rlx::Pooling::Mean, 1, 2, rlx::DType::F32));
}

template <class Tokenizer>
void check_tokenizer(const Tokenizer& t) {
  for (const char* text : {"hello world", " a\tb\n\xc3\xa9!", ""}) {
    for (int32_t id : t.encode(text))
      if (id < 0 || size_t(id) >= t.vocab_size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = rlx::fuzz::scratch_dir() / "model.gguf";
  rlx::fuzz::write_file(path, data, size);
  try {
    rlx::GgufFile f(path.string());
    for (const auto& [key, value] : f.metadata()) {
      if (!f.has(key)) std::abort();  // listed but not found
      try {
        if (value.type == rlx::GgufValueType::String) (void)f.get_string(key);
        if (value.is_integer()) (void)f.get_int(key);
        if (value.is_number()) (void)f.get_float(key);
        if (value.type == rlx::GgufValueType::Array) {
          if (value.elem == rlx::GgufValueType::String) {
            if (f.get_string_array(key).size() != value.count) std::abort();
          } else if (value.elem == rlx::GgufValueType::F32 || value.elem == rlx::GgufValueType::F64) {
            (void)f.get_float_array(key);
          } else {
            (void)f.get_int_array(key);
          }
        }
      } catch (const rlx::Error&) {
      }
    }
    for (const rlx::GgufTensorInfo& t : f.tensors()) {
      try {
        std::span<const uint8_t> b = f.bytes(t.name);
        if (b.size() != t.bytes || t.bytes > size) std::abort();  // outside the file
        if (rlx::ggml_type_dequantizable(t.type)) {
          std::vector<float> v = f.to_f32(t.name);
          if (v.size() != t.numel) std::abort();
        }
        // The blocks rlx converts to its own formats (gguf_held_quant.h):
        // one Q8_0 (34 bytes) or Q4_1 (20 bytes) block per 32 values.
        if (rlx::held_from_blocks(t.type)) {
          const std::vector<uint8_t> held = rlx::held_blocks(t.type, b);
          if (held.size() != t.numel / 32 * (t.type == rlx::GgmlType::Q5_0 ? 34 : 20)) std::abort();
        }
      } catch (const rlx::Error&) {
      }
    }
    try {
      check_llama_config(f);
    } catch (const rlx::Error&) {
    }
    try {
      if (f.get_string("general.architecture", "") == "bert") check_bert(path.string());
    } catch (const rlx::Error&) {
    }
    try {
      const std::string model = f.get_string("tokenizer.ggml.model", "");
      if (model == "bert") {
        check_tokenizer(rlx::WordPieceText::from_gguf(f));
        const rlx::WordPiece wp = rlx::WordPieceText::wordpiece_from_gguf(f);
        for (int32_t id : wp.encode(" a\tb\n\xc3\xa9! [MASK] hello", 16).ids)
          if (id < 0 || id > wp.max_id()) std::abort();
      } else if (model == "llama") check_tokenizer(rlx::SpmTokenizer::from_gguf(f));
      else check_tokenizer(rlx::BpeTokenizer::from_gguf(f));
    } catch (const rlx::Error&) {
    }
  } catch (const rlx::Error&) {
  }
  return 0;
}
