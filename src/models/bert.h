// BERT encoders from Hugging Face files: the graph (built with the public
// builder API), weight validation and loading, and a one-call loader.
#pragma once
#include <map>
#include <memory>
#include <vector>
#include <string>

#include "models/hf_config.h"
#include "models/safetensors.h"
#include "rlx/graph.h"
#include "rlx/quant.h"
#include "rlx/session.h"

namespace rlx {

// Graph for a fixed [batch, seq]. Inputs: input_ids, attention_mask and
// token_type_ids, all i32 [batch, seq]. Outputs: last_hidden_state
// [batch, seq, hidden] and, for mean or CLS pooling, embedding [batch, hidden]
// (pooled, not normalized); a cross-encoder (cfg.classifier) gives logits
// [batch, num_labels] instead of embedding.
// Params are named like the Hugging Face tensors without the "bert." prefix
// (the classifier's own "classifier.*" has none in the file either).
// The parts around the encoder stack. A Hugging Face model has both; the
// demo encoder (encoder_demo.h) has neither.
// A family's tensor names (without the model prefix): BERT's by default.
struct EncoderNames {
  std::string word = "embeddings.word_embeddings", position = "embeddings.position_embeddings",
              type = "embeddings.token_type_embeddings",  // "" = no token types
      embed_norm = "embeddings.LayerNorm";
  std::string layer = "encoder.layer.";  // + index + "."
  std::string query = "attention.self.query", key = "attention.self.key", value = "attention.self.value",
              attn_out = "attention.output.dense", attn_norm = "attention.output.LayerNorm",
              ffn_in = "intermediate.dense", ffn_out = "output.dense", out_norm = "output.LayerNorm";
};
EncoderNames encoder_names(EncoderFamily f);

// The sequence-classification head: act(hidden(x[:, 0])) then out.
struct ClassifierNames {
  std::string hidden, out;
  Activation act;
};
ClassifierNames classifier_names(EncoderFamily f);

struct BertGraphParts {
  bool token_types = true;  // the token_type_ids input and its embedding table
  bool pooled = true;       // the `embedding` output
  // Dense weights held block-quantized ("<name>.weight" -> format): their
  // products are matmul_q over params "<name>.weight.quants" and ".scales"
  // (llama_quant.h's naming). BERT-layout families only.
  std::map<std::string, QuantType> quantized;
};
// The dense weights of the BERT-layout encoder stack (graph param names),
// the products a quantized file may hold block-quantized.
std::vector<std::string> encoder_dense_weights(const BertConfig& cfg);
Graph build_bert_graph(const BertConfig& cfg, Pooling pooling, int64_t batch, int64_t seq, DType dt,
                       const BertGraphParts& parts = {});

// An encoder's weights, wherever they are stored: model.safetensors
// (BertWeights) or a GGUF file (BertGguf, bert_gguf.h). The graph's params
// keep the Hugging Face names either way.
class EncoderWeights {
 public:
  virtual ~EncoderWeights() = default;
  // The sizes of the config agree with the file's embeddings and layers:
  // cheap, so it runs before any graph is built for the config.
  virtual void check_sizes(const BertConfig& cfg) const = 0;
  // Every param of g exists with its shape, else rlx::Error naming file + tensor.
  virtual void validate(const Graph& g) const = 0;
  virtual void load_into(Executable& exe, const Graph& g) const = 0;
};

// The name a graph param has in the file ("bert." prefixed checkpoints too).
class BertWeights : public EncoderWeights {
 public:
  explicit BertWeights(const std::string& safetensors_path);
  const SafetensorsFile& file() const { return file_; }
  void check_sizes(const BertConfig& cfg) const override;
  void validate(const Graph& g) const override;
  void load_into(Executable& exe, const Graph& g) const override;

 private:
  std::string file_name(const std::string& param) const;
  SafetensorsFile file_;
  std::string prefix_;
};

struct BertLoadOptions {
  DType dtype = DType::F32;
  Device device = Device::Cpu;
  int64_t batch = 1, seq = 128;
  ExecMode mode = ExecMode::Auto;  // CUDA execution mode
  std::string trace_json;          // CUDA: per-thunk GPU times as a Chrome trace
  int threads = 0;                 // CPU threads, 0 = physical cores
  bool int8_products = false;      // CPU: products over weights in int8 (CompileOptions::int8_products)
};

// config.json + sentence-transformers pooling + model.safetensors -> a
// compiled executable with its params set.
std::unique_ptr<Executable> load_bert(const std::string& dir, const BertLoadOptions& opts);

}  // namespace rlx
