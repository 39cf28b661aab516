// BERT encoders from GGUF files, as llama.cpp's convert_hf_to_gguf.py writes
// them for BertModel (general.architecture "bert") and NomicBertModel
// ("nomic-bert"): the config from the <arch>.* metadata, the pooling from
// <arch>.pooling_type, and the weights under llama.cpp's tensor names
// (token_embd, position_embd, token_types, token_embd_norm,
// blk.N.attn_q/k/v/output or attn_qkv, attn_output_norm,
// ffn_up/gate/down, layer_output_norm), read into the graph
// build_bert_graph makes, whose params keep the Hugging Face names.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "models/bert.h"
#include "models/hf_config.h"

namespace rlx {

class GgufFile;

// A regular file that starts with GGUF's magic ("GGUF").
bool is_gguf_file(const std::string& path);

// The encoder's config from a GGUF file of architecture "bert" or
// "nomic-bert". Sizes come from <arch>.block_count, embedding_length,
// feed_forward_length, attention.head_count, attention.layer_norm_epsilon
// and context_length (nomic-bert: rope.freq_base; biases where the file
// has them);
// the vocabulary and token types from token_embd's and token_types' rows.
// Anything missing, out of BertLimits, inconsistent, or another
// architecture is an rlx::Error naming the file and the key or tensor.
BertConfig bert_config_from_gguf(const GgufFile& f);

// <arch>.pooling_type as llama.cpp numbers it: 1 mean, 2 cls, 3 last token;
// nullopt for 0 (none: token vectors) or an absent key. Rank (4) and any
// other value are an rlx::Error naming the file and the key.
std::optional<Pooling> bert_pooling_from_gguf(const GgufFile& f);

// The GGUF tensor that holds a graph param of the encoder graph of a
// family (Bert or NomicBert), "" when the family's GGUF has no such tensor.
std::string bert_gguf_tensor(EncoderFamily family, const std::string& param);

// The weights of a "bert" or "nomic-bert" GGUF. F32, F16 and BF16 tensors are read as they
// are. Quantized dense weights of the BERT layout that the graph reads as
// blocks (BertGraphParts::quantized, from held_weights()) stay quantized in
// rlx's formats (gguf_held_quant.h); every other quantized tensor is
// dequantized to f32 when it is loaded.
class BertGguf : public EncoderWeights {
 public:
  explicit BertGguf(const std::string& path);
  ~BertGguf() override;
  const GgufFile& file() const { return *file_; }
  const BertConfig& config() const { return cfg_; }
  void check_sizes(const BertConfig& cfg) const override;
  // Also: every tensor of the file is one the graph reads (a tensor it would
  // leave aside is named, as the classifier of a reranker).
  void validate(const Graph& g) const override;
  void load_into(Executable& exe, const Graph& g) const override;
  // The dense weights the file holds quantized, in the format rlx holds
  // each in (none for NomicBERT, whose stack is built apart).
  std::map<std::string, QuantType> held_weights() const;

 private:
  void expect(const std::string& tensor, const Shape& want) const;
  std::unique_ptr<GgufFile> file_;
  BertConfig cfg_;
};

}  // namespace rlx
