// Text generation: one model, many sequences. An LLM loads a LLaMA-family
// model (a GGUF file or a Hugging Face directory) once per device; each
// Sequence (a conversation) owns a slot of the model's KV-cache pool and the
// tokens it holds; the Engine steps every sequence that is generating
// together, one decode run for all of them per step (continuous batching:
// a sequence joins after its prompt is prefilled and leaves at any step).
//
//   rlx::LLM llm("model.gguf", {.device = rlx::Device::Cuda, .dtype = rlx::DType::F16});
//   auto seq = llm.new_sequence();
//   rlx::Generation g = llm.generate(*seq, llm.tokenizer().encode("Once upon"), {.max_tokens = 32},
//                                    [](const rlx::TextPiece& p) { std::cout << p.text; return true; });
//
// Thread safety: an LLM, its Engine and its Sequences may be used from
// several threads; their calls are serialised (one at a time, each
// generate() whole), so several threads share the model but not its
// throughput. For requests decoded together, submit them to the Engine from
// one loop thread (as the server does). The Tokenizer's const methods may be
// called from any thread. Stream and done callbacks run on the calling
// thread, inside the serialised call.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/chat.h"
#include "rlx/dtype.h"
#include "rlx/enums.h"
#include "rlx/options.h"

namespace rlx {

struct LlmOptions {
  Device device = Device::Cpu;  // Auto: CUDA where a device is present, else the CPU
  int device_index = 0;         // which GPU (of rank 0 with tensor_parallel)
  // Ranks the model is split over (heads and FFN rows; one GPU a rank, on
  // devices device_index, device_index + 1, ... unless `devices` names them;
  // on the CPU, threads of this process: for testing the split). Naming
  // `devices` runs the model as a group even of one rank (through NCCL).
  int tensor_parallel = 1;
  std::vector<int> devices;
  DType dtype = DType::F32;     // compute dtype (f16/bf16 on the GPU)
  int threads = 0;              // CPU threads, 0 = physical cores
  ExecMode mode = ExecMode::Auto;
  // Tokens each sequence can hold (prompt and reply); 0: the model's context
  // length, at most kDefaultMaxContext.
  int64_t ctx_size = 0;
  int max_sequences = 4;        // sequences holding a KV slot at once
  int64_t prefill_chunk = 512;  // the most prompt tokens prefilled in one run
  // Matmul weights not stored as Q8_0/Q4_0 are quantized to this at load.
  std::optional<QuantType> quantize;
  static constexpr int64_t kDefaultMaxContext = 4096;
};

struct SamplingParams {
  float temperature = 0.f;  // <= 0: greedy (the argmax, lowest id on ties)
  int top_k = 0;            // 0: no limit
  float top_p = 1.f;
  float min_p = 0.f;        // drop tokens less likely than min_p times the most likely one
  // llama.cpp's penalties over the last repeat_last_n tokens of the sequence
  // (-1: all of them): a logit l of a token seen is l / repeat_penalty when
  // l > 0, else l * repeat_penalty; then minus frequency_penalty per
  // occurrence and presence_penalty once.
  float repeat_penalty = 1.f;
  int repeat_last_n = 64;
  float frequency_penalty = 0.f, presence_penalty = 0.f;
  std::optional<uint64_t> seed;  // none: a random seed, reported in Generation::seed
};

// Throws rlx::Error naming the field when a value is out of range.
void check_sampling(const SamplingParams& p);

struct GenerateOptions {
  int max_tokens = 128;           // new tokens at most
  SamplingParams sampling;
  std::vector<std::string> stop;  // text that ends the reply (not included in it)
  std::vector<int32_t> stop_ids;  // tokens that end it besides end-of-sequence
  bool ignore_eos = false;
};

enum class FinishReason { None, Stop, Length, Eos, Cancelled };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "eos", "cancelled"

// Whole UTF-8 text as it is produced, and the ids that produced it (a piece
// may carry ids and no text yet, while a character or a possible stop
// string is incomplete).
struct TextPiece {
  std::string text;
  std::vector<int32_t> ids;
};
// Called for each piece; returning false cancels the generation.
using StreamCallback = std::function<bool(const TextPiece&)>;

struct Generation {
  std::string text;          // the reply, stop string excluded
  std::vector<int32_t> ids;  // the new tokens (an end token included)
  FinishReason finish = FinishReason::None;
  bool context_full = false;  // finish Length because the sequence's context is full
  uint64_t seed = 0;          // the sampling seed used
  int64_t prompt_tokens = 0;  // tokens the request added before generating
  int64_t prefilled_tokens = 0;  // of those and earlier ones, how many were run (the rest were cached)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // parse_special: control-token text ("<|im_end|>") becomes the control
  // token; otherwise user text never does. add_special: BOS where the model
  // asks for it.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = false,
                                      bool parse_special = false) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual std::string token_text(int32_t id) const = 0;  // the bytes one token adds
  virtual int32_t token_id(const std::string& token) const = 0;  // -1 when absent
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
};

struct EngineStats {
  uint64_t prefill_runs = 0, decode_runs = 0;
  uint64_t prefilled_tokens = 0, decoded_tokens = 0;
  uint64_t weight_bytes = 0, kv_pool_bytes = 0, arena_bytes = 0;
  int compiled_graphs = 0;
};

class LLM;

// A conversation: a KV-cache slot and the tokens in it. Tokens that a later
// request keeps as its prefix are not computed again. Destroying it frees
// the slot; it must not outlive its LLM.
class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  const std::vector<int32_t>& tokens() const;  // every token so far, in order
  int64_t cached_tokens() const;  // how many of them the cache holds
  int slot() const;
  // Keeps the first n tokens (and their cached rows); drops the rest.
  void truncate(int64_t n);

  struct State;  // opaque: made by LLM::new_sequence
  explicit Sequence(std::unique_ptr<State> s);
  State& state() { return *s_; }

 private:
  std::unique_ptr<State> s_;
};

// Steps many requests together. submit() queues one; step() runs one
// prefill chunk (the oldest waiting request's) and one decode run for every
// request that is generating. on_done is called once per request, with its
// result, when it finishes (stop, length, eos or cancelled).
class Engine {
 public:
  using RequestId = uint64_t;
  using DoneCallback = std::function<void(const Generation&)>;
  ~Engine();
  // `append` is added to the sequence's tokens; generation starts after it.
  // The sequence must outlive the request and carry no other request.
  RequestId submit(Sequence& seq, std::vector<int32_t> append, const GenerateOptions& o,
                   StreamCallback on_piece = {}, DoneCallback on_done = {});
  void cancel(RequestId id);  // finishes it (Cancelled) at the next step
  // One step; false when there was nothing to do.
  bool step();
  bool idle() const;
  size_t running() const;  // requests submitted and not yet finished
  EngineStats stats() const;

  struct Impl;  // opaque: made by LLM
  explicit Engine(std::unique_ptr<Impl> impl);
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class LLM {
 public:
  explicit LLM(const std::string& path, const LlmOptions& o = {});
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Throws when the model came without one (a Hugging Face directory
  // without tokenizer.json: ids in and out only).
  const Tokenizer& tokenizer() const;
  bool has_tokenizer() const;
  int32_t eos_id() const;
  int64_t vocab_size() const;
  int64_t ctx_size() const;  // tokens one sequence can hold
  int max_sequences() const;
  const std::string& chat_template() const;  // "" when the model has none
  // The prompt text for a conversation in the model's own template; throws
  // naming the template when rlx cannot render it.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // The token ids of that prompt (control tokens parsed in the template's
  // text, never in the messages' content).
  std::vector<int32_t> chat_tokens(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // The stop text of an assistant turn in the model's template ("" without one).
  std::string chat_turn_end() const;
  // o with that turn end added to its stops (what chat() generates with),
  // for callers that submit a chat prompt to the engine themselves.
  GenerateOptions chat_options(const GenerateOptions& o) const;

  // A new conversation; throws when max_sequences are held.
  std::unique_ptr<Sequence> new_sequence();
  // Appends ids to seq and generates after them (only tokens not cached run).
  Generation generate(Sequence& seq, const std::vector<int32_t>& append, const GenerateOptions& o = {},
                      const StreamCallback& on_piece = {});
  // A one-off: a fresh sequence for the prompt's ids, freed after.
  Generation generate(const std::vector<int32_t>& prompt, const GenerateOptions& o = {},
                      const StreamCallback& on_piece = {});
  // The conversation's prompt in the model's template, as a continuation of
  // seq: the tokens seq already holds that match are kept, the rest run.
  Generation chat(Sequence& seq, const std::vector<ChatMessage>& messages, const GenerateOptions& o = {},
                  const StreamCallback& on_piece = {});
  // Many prompts through the engine together (up to max_sequences at once).
  std::vector<Generation> generate_batch(const std::vector<std::vector<int32_t>>& prompts,
                                         const GenerateOptions& o = {});

  // Compiles now every graph that requests would otherwise compile on first
  // use (prefill buckets, and the decode step at every batch bucket).
  void prepare();

  Engine& engine();
  EngineStats stats() const;
  std::string backend_summary() const;  // how the decode step runs (device, mode)

 private:
  std::recursive_mutex& mutex() const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "RLX_VERSION" of the build (also the CMake package's version).
const char* version();

}  // namespace rlx
