// The public model object: the files read once, the pool runner, the engine
// over it, the tokenizer seen through the public interface.
#include <algorithm>

#include "backends/backend.h"
#include "engine/engine_impl.h"
#include "models/chat_template.h"
#include "models/llama_shard.h"
#include "models/llama_model_files.h"
#include "rlx/error.h"

namespace rlx {
namespace {

class TokenizerView : public Tokenizer {
 public:
  explicit TokenizerView(const TextTokenizer& t) : t_(t) {}
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override {
    EncodeOptions o;
    o.add_special = add_special;
    o.parse_special = parse_special;
    return t_.encode(text, o);
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return t_.decode(ids); }
  std::string token_text(int32_t id) const override { return t_.token_bytes(id); }
  int32_t token_id(const std::string& token) const override { return t_.id_of(token); }
  size_t vocab_size() const override { return t_.vocab_size(); }
  int32_t bos_id() const override { return t_.bos_id(); }
  int32_t eos_id() const override { return t_.eos_id(); }

 private:
  const TextTokenizer& t_;
};

Device resolve_device(Device d) {
  if (d != Device::Auto) return d;
  return cuda_available() ? Device::Cuda : Device::Cpu;
}

// Marks that stand for message contents while the template is rendered, so
// that the contents are tokenized apart, as plain text.
std::string content_mark(size_t i) { return "\x01rlx-content-" + std::to_string(i) + "\x01"; }

}  // namespace

struct LLM::Impl {
  LlmOptions o;
  LlamaModelFiles files;
  QuantizedWeights quantized;
  std::unique_ptr<PoolRunner> runner;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<TokenizerView> tokenizer;
};

LLM::LLM(const std::string& path, const LlmOptions& o) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = o;
  m.o.device = resolve_device(o.device);
  RLX_CHECK(o.device_index >= 0, "llm: device_index " << o.device_index << " must be >= 0");
  RLX_CHECK(m.o.device == Device::Cuda || (o.device_index == 0 && o.devices.empty()),
            "llm: device_index and devices name GPUs; this model runs on the CPU");
  RLX_CHECK(o.tensor_parallel >= 1, "llm: tensor_parallel " << o.tensor_parallel << " must be >= 1");
  RLX_CHECK(o.devices.empty() || int(o.devices.size()) == o.tensor_parallel,
            "llm: " << o.devices.size() << " devices for tensor_parallel " << o.tensor_parallel);
  RLX_CHECK(o.ctx_size >= 0, "llm: ctx_size " << o.ctx_size << " must be >= 0");
  RLX_CHECK(o.threads >= 0, "llm: threads " << o.threads << " must be >= 0 (0: all cores)");
  m.files = open_llama_model(path);
  const LlamaConfig& c = m.files.weights->config();
  m.quantized = plan_llama_quantization(
      c, [&](const std::string& t) { return m.files.weights->stored_quant(t); }, o.quantize, m.o.device);
  const int64_t ctx = o.ctx_size ? o.ctx_size : std::min<int64_t>(c.max_positions, LlmOptions::kDefaultMaxContext);
  RLX_CHECK(ctx <= c.max_positions, "llm: '" << path << "': ctx_size " << ctx << " exceeds the model's context length "
                                             << c.max_positions);
  try {
    if (o.tensor_parallel > 1) llama_rank_config(c, o.tensor_parallel, m.quantized);  // refused with the file's name
  } catch (const Error& e) {
    RLX_FAIL("llm: '" << path << "': " << e.what());
  }
  PoolRunnerOptions ro;
  ro.device = m.o.device;
  ro.dtype = o.dtype;
  ro.threads = o.threads;
  ro.mode = o.mode;
  ro.cache_len = ctx;
  ro.sequences = o.max_sequences;
  ro.prefill_chunk = o.prefill_chunk;
  ro.device_index = o.device_index;
  ro.tensor_parallel = o.tensor_parallel;
  ro.devices = o.devices;
  m.runner = std::make_unique<PoolRunner>(*m.files.weights, m.quantized, ro);
  m.engine = std::make_unique<Engine>(std::make_unique<Engine::Impl>(*m.runner, m.files.tokenizer.get(), m.files.eos_id));
  if (m.files.tokenizer) m.tokenizer = std::make_unique<TokenizerView>(*m.files.tokenizer);
}

LLM::~LLM() = default;

const Tokenizer& LLM::tokenizer() const {
  RLX_CHECK(impl_->tokenizer, "llm: this model has no tokenizer (no tokenizer.json): give token ids");
  return *impl_->tokenizer;
}
bool LLM::has_tokenizer() const { return impl_->tokenizer != nullptr; }
int32_t LLM::eos_id() const { return impl_->files.eos_id; }
int64_t LLM::vocab_size() const { return impl_->runner->vocab(); }
int64_t LLM::ctx_size() const { return impl_->runner->cache_len(); }
int LLM::max_sequences() const { return impl_->runner->sequences(); }
const std::string& LLM::chat_template() const { return impl_->files.chat_template; }
Engine& LLM::engine() { return *impl_->engine; }
void LLM::prepare() {
  std::lock_guard<std::recursive_mutex> lock(impl_->engine->impl().mu);
  impl_->runner->prepare();
}
EngineStats LLM::stats() const { return impl_->engine->stats(); }
std::string LLM::backend_summary() const { return impl_->runner->backend_summary(); }

std::string LLM::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  RLX_CHECK(!chat_template().empty(), "chat: the model has no chat template");
  const Tokenizer& t = tokenizer();
  const std::string bos = t.bos_id() >= 0 ? t.token_text(t.bos_id()) : "";
  const std::string eos = eos_id() >= 0 ? t.token_text(eos_id()) : "";
  return render_chat(chat_template(), messages, add_generation_prompt, bos, eos);
}

std::vector<int32_t> LLM::chat_tokens(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  // The template's own text may hold control tokens; the messages' text never does.
  std::vector<ChatMessage> marked = messages;
  for (size_t i = 0; i < marked.size(); ++i) marked[i].content = content_mark(i);
  const std::string text = apply_chat_template(marked, add_generation_prompt);
  const Tokenizer& t = tokenizer();
  std::vector<int32_t> ids;
  size_t at = 0;
  auto add = [&](std::string_view piece, bool special) {
    if (piece.empty()) return;
    std::vector<int32_t> p = t.encode(piece, false, special);
    ids.insert(ids.end(), p.begin(), p.end());
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string mark = content_mark(i);
    const size_t found = text.find(mark, at);
    if (found == std::string::npos) continue;  // a message the template leaves out
    add(std::string_view(text).substr(at, found - at), true);
    add(messages[i].content, false);
    at = found + mark.size();
  }
  add(std::string_view(text).substr(at), true);
  return ids;
}

std::string LLM::chat_turn_end() const {
  if (chat_template().empty()) return "";
  std::string end = rlx::chat_turn_end(detect_chat_format(chat_template()));
  return end;
}

std::recursive_mutex& LLM::mutex() const { return impl_->engine->impl().mu; }

std::unique_ptr<Sequence> LLM::new_sequence() {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  auto s = std::make_unique<Sequence::State>();
  s->engine = &impl_->engine->impl();
  s->slot = s->engine->take_slot();
  return std::make_unique<Sequence>(std::move(s));
}

Generation LLM::generate(Sequence& seq, const std::vector<int32_t>& append, const GenerateOptions& o,
                         const StreamCallback& on_piece) {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  Generation result;
  bool done = false;
  engine().submit(seq, append, o, on_piece, [&](const Generation& g) {
    result = g;
    done = true;
  });
  try {
    while (!done) engine().step();
  } catch (...) {
    engine().impl().forget(seq.state());  // its callback points into this frame
    throw;
  }
  return result;
}

Generation LLM::generate(const std::vector<int32_t>& prompt, const GenerateOptions& o, const StreamCallback& on_piece) {
  std::lock_guard<std::recursive_mutex> lock(mutex());  // until the sequence is freed
  auto seq = new_sequence();
  return generate(*seq, prompt, o, on_piece);
}

GenerateOptions LLM::chat_options(const GenerateOptions& o) const {
  GenerateOptions with_end = o;
  const std::string end = chat_turn_end();
  if (!end.empty()) {
    const int32_t id = tokenizer().token_id(end);
    if (id >= 0) with_end.stop_ids.push_back(id);
    else with_end.stop.push_back(end);
  }
  return with_end;
}

Generation LLM::chat(Sequence& seq, const std::vector<ChatMessage>& messages, const GenerateOptions& o,
                     const StreamCallback& on_piece) {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  const std::vector<int32_t> ids = chat_tokens(messages, true);
  const std::vector<int32_t>& have = seq.tokens();
  const size_t keep = size_t(std::mismatch(have.begin(), have.end(), ids.begin(), ids.end()).first - have.begin());
  seq.truncate(int64_t(keep));
  return generate(seq, std::vector<int32_t>(ids.begin() + int64_t(keep), ids.end()), chat_options(o), on_piece);
}

std::vector<Generation> LLM::generate_batch(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o) {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  std::vector<Generation> results(prompts.size());
  std::vector<std::unique_ptr<Sequence>> seqs(prompts.size());
  size_t next = 0, finished = 0;
  std::vector<size_t> retire;
  auto start = [&]() {
    while (next < prompts.size() && !engine().impl().free_slots.empty()) {
      const size_t i = next++;
      seqs[i] = new_sequence();
      engine().submit(*seqs[i], prompts[i], o, {}, [&, i](const Generation& g) {
        results[i] = g;
        retire.push_back(i);
      });
    }
  };
  start();
  while (finished < prompts.size()) {
    engine().step();
    for (size_t i : retire) seqs[i].reset();  // frees its slot for the next prompt
    finished += retire.size();
    retire.clear();
    start();
  }
  return results;
}

const char* version() { return RLX_VERSION; }

}  // namespace rlx
