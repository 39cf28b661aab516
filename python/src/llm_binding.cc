// rlx.LLM: text generation through rlx::LLM and its Engine. Every request is
// submitted to the engine and stepped from here, so a stream is a Python
// iterator that runs one engine step per piece (no thread), requests from
// several Python threads share the engine's steps, and Ctrl-C is looked at
// between steps. The model, the sampling and the chat templates are rlx's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "binding_util.h"
#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx_py {
namespace {

using namespace nb::literals;

// The LLM and its engine are driven by one thread at a time: `mu` is taken
// around every call into them, always with the GIL released (a thread
// holding `mu` may wait for the GIL, never the other way round).
struct Model {
  std::unique_ptr<rlx::LLM> llm;
  std::mutex mu;
  int held = 0;  // sequences the binding holds (each a slot of max_sequences)
};

// One request's sequence: freed under the model's lock, whichever way the
// request ends (done, an error, Ctrl-C, a stream dropped half way).
class Slot {
 public:
  explicit Slot(Model& m) : m_(m) {}
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() { reset(); }
  bool active() const { return seq_ != nullptr; }  // under the lock
  // Under the lock.
  rlx::Sequence& take() {
    seq_ = m_.llm->new_sequence();
    ++m_.held;
    return *seq_;
  }
  // Under the lock, or taking it (without the GIL).
  void reset_locked() {
    if (seq_) {
      seq_.reset();
      --m_.held;
    }
  }
  void reset() {
    if (!seq_) return;
    std::lock_guard<std::mutex> lock(m_.mu);
    reset_locked();
  }

 private:
  Model& m_;
  std::unique_ptr<rlx::Sequence> seq_;
};

struct Result {
  rlx::Generation g;
  nb::str text() const { return utf8_text(g.text); }
  std::string finish_reason() const { return rlx::finish_reason_name(g.finish); }
  size_t completion_tokens() const { return g.ids.size(); }
  std::string repr() const {
    return "Generation(finish_reason='" + finish_reason() + "', prompt_tokens=" + std::to_string(g.prompt_tokens) +
           ", completion_tokens=" + std::to_string(g.ids.size()) + ", text=" +
           nb::cast<std::string>(nb::repr(text())) + ")";
  }
};

// "The value of a field is out of range" is the caller's ValueError.
void check_sampling_values(const rlx::SamplingParams& p) {
  try {
    rlx::check_sampling(p);
  } catch (const rlx::Error& e) {
    throw nb::value_error(e.what());
  }
}

std::vector<std::string> stop_list(nb::handle stop) {
  std::vector<std::string> out;
  if (stop.is_none()) return out;
  if (nb::isinstance<nb::str>(stop)) return {nb::cast<std::string>(stop)};
  for (nb::handle s : stop) {
    if (!nb::isinstance<nb::str>(s)) throw nb::type_error("stop must be a str or a list of str");
    out.push_back(nb::cast<std::string>(s));
  }
  return out;
}

// Generation keywords, as the three generating calls take them.
struct GenArgs {
  int max_tokens;
  float temperature, top_p;
  int top_k;
  float min_p, repeat_penalty;
  int repeat_last_n;
  float presence_penalty, frequency_penalty;
  nb::handle stop;
  std::vector<int32_t> stop_ids;
  std::optional<uint64_t> seed;
  bool ignore_eos;

  rlx::GenerateOptions options() const {
    if (max_tokens < 1) throw nb::value_error(("max_tokens must be >= 1, not " + std::to_string(max_tokens)).c_str());
    rlx::GenerateOptions o;
    o.max_tokens = max_tokens;
    o.sampling.temperature = temperature;
    o.sampling.top_p = top_p;
    o.sampling.top_k = top_k;
    o.sampling.min_p = min_p;
    o.sampling.repeat_penalty = repeat_penalty;
    o.sampling.repeat_last_n = repeat_last_n;
    o.sampling.presence_penalty = presence_penalty;
    o.sampling.frequency_penalty = frequency_penalty;
    o.sampling.seed = seed;
    o.stop = stop_list(stop);
    o.stop_ids = stop_ids;
    o.ignore_eos = ignore_eos;
    check_sampling_values(o.sampling);
    return o;
  }
};

// A reply as it is produced: iterating yields its text pieces; `result`
// holds the whole Generation once the iteration has ended.
class Stream {
 public:
  Stream(nb::object owner, Model& m, std::vector<int32_t> prompt, const rlx::GenerateOptions& o)
      : owner_(std::move(owner)), m_(m), slot_(m), shared_(std::make_shared<Shared>()) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m_.mu);
    rlx::Sequence& seq = slot_.take();
    std::shared_ptr<Shared> s = shared_;  // the callbacks run inside steps, under the lock
    try {
      m_.llm->engine().submit(
          seq, std::move(prompt), o,
          [s](const rlx::TextPiece& p) {
            if (!p.text.empty()) s->pieces.push_back(p.text);
            return true;
          },
          [s](const rlx::Generation& g) {
            s->result = g;
            s->done = true;
          });
    } catch (...) {
      slot_.reset_locked();  // here, under the lock and without the GIL
      throw;
    }
  }
  ~Stream() {
    nb::gil_scoped_release release;
    slot_.reset();  // a request still running ends, without callbacks
  }

  nb::str next() {
    std::string piece;
    bool have = false;
    InterruptCheck interrupt;
    {
      nb::gil_scoped_release release;
      while (!have) {
        {
          std::lock_guard<std::mutex> lock(m_.mu);
          if (!shared_->pieces.empty()) {
            piece = std::move(shared_->pieces.front());
            shared_->pieces.pop_front();
            have = true;
            break;
          }
          if (shared_->done || !slot_.active()) {  // finished, closed or interrupted
            slot_.reset_locked();
            break;
          }
          RLX_CHECK(m_.llm->engine().step(), "llm: the engine is idle while a request waits");
        }
        if (interrupt.poll()) {
          slot_.reset();
          break;
        }
      }
    }
    interrupt.rethrow();
    if (!have) throw nb::stop_iteration();
    return utf8_text(piece);
  }

  // Ends the request now; pieces not yet read are dropped (a stream dropped
  // half way ends on its own).
  void close() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m_.mu);
    shared_->pieces.clear();
    slot_.reset_locked();
  }

  std::optional<Result> result() const {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m_.mu);  // another thread's step may be finishing it
    if (!shared_->done) return std::nullopt;
    return Result{shared_->result};
  }

 private:
  struct Shared {
    std::deque<std::string> pieces;
    rlx::Generation result;
    bool done = false;
  };
  nb::object owner_;  // the LLM, kept alive while the stream is
  Model& m_;
  Slot slot_;
  std::shared_ptr<Shared> shared_;
};

class Tokenizer {
 public:
  Tokenizer(nb::object owner, const rlx::Tokenizer& t) : owner_(std::move(owner)), t_(t) {}
  std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special) const {
    nb::gil_scoped_release release;
    return t_.encode(text, add_special, parse_special);
  }
  nb::str decode(const std::vector<int32_t>& ids) const {
    check_ids(ids);
    std::string s;
    {
      nb::gil_scoped_release release;
      s = t_.decode(ids);
    }
    return utf8_text(s);
  }
  nb::bytes token_bytes(int32_t id) const {
    check_ids({id});
    const std::string s = t_.token_text(id);
    return nb::bytes(s.data(), s.size());
  }
  int32_t token_id(const std::string& token) const { return t_.token_id(token); }
  size_t vocab_size() const { return t_.vocab_size(); }
  int32_t bos_id() const { return t_.bos_id(); }
  int32_t eos_id() const { return t_.eos_id(); }

 private:
  void check_ids(const std::vector<int32_t>& ids) const {
    for (int32_t id : ids)
      if (id < 0 || size_t(id) >= t_.vocab_size())
        throw nb::value_error(("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(t_.vocab_size()) + ")")
                                  .c_str());
  }
  nb::object owner_;
  const rlx::Tokenizer& t_;
};

class LLM {
 public:
  LLM(const std::string& path, const std::string& device, const std::string& dtype, int64_t ctx_size,
      int max_sequences, int threads, int tensor_parallel) {
    if (!std::filesystem::exists(path)) {
      PyErr_SetObject(PyExc_FileNotFoundError, nb::make_tuple(2, "no model at '" + path + "'", path).ptr());
      throw nb::python_error();
    }
    if (max_sequences < 1) throw nb::value_error("max_sequences must be >= 1");
    if (ctx_size < 0) throw nb::value_error("ctx_size must be >= 0 (0: the model's context, at most 4096)");
    if (threads < 0) throw nb::value_error("threads must be >= 0 (0: every physical core)");
    if (tensor_parallel < 1) throw nb::value_error("tensor_parallel must be >= 1");
    rlx::LlmOptions o;
    o.device = resolve_device(parse_device(device));
    o.device_index = parse_device_index(device);
    o.tensor_parallel = tensor_parallel;
    o.dtype = parse_dtype(dtype);
    o.ctx_size = ctx_size;
    o.max_sequences = max_sequences;
    o.threads = threads;
    device_ = o.device;
    path_ = path;
    nb::gil_scoped_release release;
    m_.llm = std::make_unique<rlx::LLM>(path, o);
  }

  // A str is tokenized as `rlx generate` does (BOS where the model asks for
  // it), its text never read as control tokens; a list is token ids.
  std::vector<int32_t> prompt_ids(nb::handle prompt) {
    if (nb::isinstance<nb::str>(prompt)) {
      const std::string text = nb::cast<std::string>(prompt);
      nb::gil_scoped_release release;
      return m_.llm->tokenizer().encode(text, true, false);
    }
    try {
      return nb::cast<std::vector<int32_t>>(prompt);
    } catch (const nb::cast_error&) {
      throw nb::type_error(("prompt must be a str or a list of token ids, not " +
                            std::string(nb::type_name(prompt.type()).c_str()))
                               .c_str());
    }
  }

  nb::object generate(nb::handle self, nb::handle prompt, const GenArgs& a, bool stream) {
    return run(self, prompt_ids(prompt), a.options(), stream);
  }

  nb::object chat(nb::handle self, nb::handle messages, const GenArgs& a, bool stream) {
    std::vector<rlx::ChatMessage> ms = chat_messages(messages);
    const rlx::GenerateOptions o = a.options();
    std::vector<int32_t> ids;
    rlx::GenerateOptions with_end;
    {
      nb::gil_scoped_release release;
      ids = m_.llm->chat_tokens(ms, true);
      with_end = m_.llm->chat_options(o);
    }
    return run(self, std::move(ids), with_end, stream);
  }

  nb::str apply_chat_template(nb::handle messages, bool add_generation_prompt) {
    return utf8_text(m_.llm->apply_chat_template(chat_messages(messages), add_generation_prompt));
  }

  // Every prompt through the engine together, up to the free slots at once.
  std::vector<Result> generate_batch(nb::handle prompts, const GenArgs& a) {
    std::vector<std::vector<int32_t>> ids;
    for (nb::handle p : prompts) ids.push_back(prompt_ids(p));
    const rlx::GenerateOptions o = a.options();
    std::vector<Result> results(ids.size());
    InterruptCheck interrupt;
    {
      nb::gil_scoped_release release;
      std::vector<std::unique_ptr<Slot>> slots(ids.size());
      size_t next = 0, finished = 0;
      std::vector<size_t> retired;
      while (finished < ids.size()) {
        {
          std::lock_guard<std::mutex> lock(m_.mu);
          while (next < ids.size() && m_.held < m_.llm->max_sequences()) {
            const size_t i = next++;
            slots[i] = std::make_unique<Slot>(m_);
            m_.llm->engine().submit(slots[i]->take(), ids[i], o, {}, [&, i](const rlx::Generation& g) {
              results[i].g = g;
              retired.push_back(i);
            });
          }
          RLX_CHECK(next > finished || m_.held < m_.llm->max_sequences(),
                    "llm: generate_batch: every one of the " << m_.llm->max_sequences()
                                                             << " sequences is held by a stream");
          m_.llm->engine().step();
          for (size_t i : retired) slots[i]->reset_locked();  // frees its slot for the next prompt
          finished += retired.size();
          retired.clear();
        }
        if (interrupt.poll()) break;
      }
      // Requests still running (Ctrl-C, an error) end as `slots` goes.
    }
    interrupt.rethrow();
    return results;
  }

  Tokenizer tokenizer(nb::handle self) { return Tokenizer(nb::borrow(self), m_.llm->tokenizer()); }
  void prepare() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m_.mu);
    m_.llm->prepare();
  }
  int64_t ctx_size() const { return m_.llm->ctx_size(); }
  int max_sequences() const { return m_.llm->max_sequences(); }
  int64_t vocab_size() const { return m_.llm->vocab_size(); }
  int32_t eos_id() const { return m_.llm->eos_id(); }
  const std::string& chat_template() const { return m_.llm->chat_template(); }
  std::string backend() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m_.mu);
    return m_.llm->backend_summary();
  }
  std::string device() const { return device_name(device_); }
  std::string repr() const {
    return "LLM('" + path_ + "', device='" + device() + "', ctx_size=" + std::to_string(ctx_size()) +
           ", max_sequences=" + std::to_string(max_sequences()) + ")";
  }

 private:
  static std::vector<rlx::ChatMessage> chat_messages(nb::handle messages) {
    std::vector<rlx::ChatMessage> out;
    size_t i = 0;
    for (nb::handle h : messages) {
      if (!nb::isinstance<nb::dict>(h))
        throw nb::type_error(("messages[" + std::to_string(i) + "] must be a dict with 'role' and 'content'").c_str());
      nb::dict d = nb::borrow<nb::dict>(h);
      for (const char* key : {"role", "content"})
        if (!d.contains(key) || !nb::isinstance<nb::str>(d[key]))
          throw nb::value_error(
              ("messages[" + std::to_string(i) + "]['" + key + "'] must be given, as a str").c_str());
      out.push_back({nb::cast<std::string>(d["role"]), nb::cast<std::string>(d["content"])});
      ++i;
    }
    return out;
  }

  nb::object run(nb::handle self, std::vector<int32_t> ids, const rlx::GenerateOptions& o, bool stream) {
    if (stream) return nb::cast(new Stream(nb::borrow(self), m_, std::move(ids), o), nb::rv_policy::take_ownership);
    Result result;
    InterruptCheck interrupt;
    {
      nb::gil_scoped_release release;
      Slot slot(m_);
      bool done = false;
      {
        std::lock_guard<std::mutex> lock(m_.mu);
        m_.llm->engine().submit(slot.take(), std::move(ids), o, {}, [&](const rlx::Generation& g) {
          result.g = g;
          done = true;
        });
      }
      while (true) {
        {
          // Locked step by step: requests of other threads share the steps.
          std::lock_guard<std::mutex> lock(m_.mu);
          if (done) break;
          RLX_CHECK(m_.llm->engine().step(), "llm: the engine is idle while a request waits");
        }
        if (interrupt.poll()) break;
      }
    }
    interrupt.rethrow();
    return nb::cast(result);
  }

  Model m_;
  rlx::Device device_ = rlx::Device::Cpu;
  std::string path_;
};

}  // namespace

void bind_llm(nb::module_& m) {
  nb::class_<Result>(m, "Generation", "A finished reply.")
      .def_prop_ro("text", &Result::text, "The reply's text, a stop string excluded.")
      .def_prop_ro(
          "token_ids", [](const Result& r) { return r.g.ids; }, "The new tokens (an end token included).")
      .def_prop_ro("finish_reason", &Result::finish_reason, "'stop', 'length', 'eos' or 'cancelled'.")
      .def_prop_ro(
          "prompt_tokens", [](const Result& r) { return r.g.prompt_tokens; }, "Tokens of the prompt.")
      .def_prop_ro("completion_tokens", &Result::completion_tokens, "len(token_ids).")
      .def_prop_ro(
          "prefilled_tokens", [](const Result& r) { return r.g.prefilled_tokens; },
          "Prompt tokens that were run (the rest came from the cache).")
      .def_prop_ro(
          "context_full", [](const Result& r) { return r.g.context_full; },
          "finish_reason 'length' because the sequence's context is full.")
      .def_prop_ro(
          "seed", [](const Result& r) { return r.g.seed; }, "The sampling seed used.")
      .def("__repr__", &Result::repr);

  nb::class_<Stream>(m, "GenerationStream",
                     "A reply as it is produced: iterate for its text pieces; `result` is the Generation "
                     "once the iteration has ended.")
      .def("__iter__", [](nb::handle s) { return nb::borrow(s); }, nb::sig("def __iter__(self) -> GenerationStream"))
      .def("__next__", &Stream::next)
      .def("close", &Stream::close, "Ends the reply now.")
      .def_prop_ro("result", &Stream::result, "The Generation, once the iteration has ended (else None).");

  nb::class_<Tokenizer>(m, "Tokenizer", "The model's tokenizer.")
      .def("encode", &Tokenizer::encode, "text"_a, "add_special"_a = false, "parse_special"_a = false,
           "Token ids of `text`. add_special: BOS (and EOS) where the model asks for them; parse_special: "
           "control-token text such as '<|im_end|>' becomes the control token (never do this with a user's text).")
      .def("decode", &Tokenizer::decode, "ids"_a, "The text of token ids.")
      .def("token_bytes", &Tokenizer::token_bytes, "id"_a, "The bytes one token adds to a text.")
      .def("token_id", &Tokenizer::token_id, "token"_a, "The id of a token's text, -1 when absent.")
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def_prop_ro("bos_id", &Tokenizer::bos_id)
      .def_prop_ro("eos_id", &Tokenizer::eos_id)
      .def("__len__", &Tokenizer::vocab_size);

  auto cls = nb::class_<LLM>(m, "LLM",
                             "A LLaMA-family model (a GGUF file, or a Hugging Face directory) for text generation: "
                             "one copy of the weights, up to max_sequences replies generated together.");
  cls.def(nb::init<const std::string&, const std::string&, const std::string&, int64_t, int, int, int>(), "path"_a,
          "device"_a = "auto", "dtype"_a = "f32", "ctx_size"_a = 0, "max_sequences"_a = 4, "threads"_a = 0,
          "tensor_parallel"_a = 1,
          "Loads the model at `path`. device: 'auto' (CUDA where present, else the CPU), 'cpu', 'cuda' or 'cuda:N' "
          "(a GPU by index); dtype: "
          "'f32', 'f16' or 'bf16' (the compute type; f16/bf16 on the GPU); ctx_size: tokens one reply and its "
          "prompt may hold (0: the model's context, at most 4096); max_sequences: replies generated at once; "
          "threads: CPU threads (0: every physical core); tensor_parallel: split the model over N GPUs from the "
          "device's index on (on the CPU, N host ranks) by heads and FFN rows.");

#define RLX_PY_GENERATE_KWARGS                                                                                       \
  "max_tokens"_a = 128, "temperature"_a = 0.f, "top_p"_a = 1.f, "top_k"_a = 0, "min_p"_a = 0.f,                     \
      "repeat_penalty"_a = 1.f, "repeat_last_n"_a = 64, "presence_penalty"_a = 0.f, "frequency_penalty"_a = 0.f,   \
      "stop"_a = nb::none(), "stop_ids"_a = std::vector<int32_t>{}, "seed"_a = nb::none(), "ignore_eos"_a = false
#define RLX_PY_GENERATE_ARGS                                                                                       \
  int max_tokens, float temperature, float top_p, int top_k, float min_p, float repeat_penalty, int repeat_last_n,  \
      float presence_penalty, float frequency_penalty, nb::handle stop, std::vector<int32_t> stop_ids,              \
      std::optional<uint64_t> seed, bool ignore_eos
#define RLX_PY_GEN_ARGS                                                                                            \
  GenArgs {                                                                                                         \
    max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, repeat_last_n, presence_penalty,                  \
        frequency_penalty, stop, std::move(stop_ids), seed, ignore_eos                                              \
  }
#define RLX_PY_GENERATE_DOC                                                                                        \
  " max_tokens: new tokens at most. temperature 0 is greedy (the default); top_k (0: all), top_p, min_p, "          \
  "repeat_penalty / presence_penalty / frequency_penalty over the last repeat_last_n tokens (-1: all) as "        \
  "llama.cpp applies them; seed (None: a random one, reported in the result). stop: a str or a list of str "      \
  "that ends the reply (not included); stop_ids: tokens that end it; ignore_eos: go on past the end token. "      \
  "stream=True returns a GenerationStream yielding text pieces as they are produced. The GIL is released while "  \
  "the model runs; Ctrl-C stops the reply."

  cls.def(
      "generate",
      [](nb::handle self, nb::handle prompt, RLX_PY_GENERATE_ARGS, bool stream) {
        return nb::cast<LLM&>(self).generate(self, prompt, RLX_PY_GEN_ARGS, stream);
      },
      "prompt"_a, nb::kw_only(), RLX_PY_GENERATE_KWARGS, "stream"_a = false,
      nb::sig("def generate(self, prompt: str | list[int], *, max_tokens: int = 128, temperature: float = 0.0, "
              "top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, repeat_penalty: float = 1.0, "
              "repeat_last_n: int = 64, presence_penalty: float = 0.0, frequency_penalty: float = 0.0, "
              "stop: str | list[str] | None = None, stop_ids: list[int] = [], seed: int | None = None, "
              "ignore_eos: bool = False, stream: bool = False) -> Generation | GenerationStream"),
      "A reply continuing `prompt` (a str, tokenized as `rlx generate` does, or token ids): a Generation, or "
      "with stream=True a GenerationStream." RLX_PY_GENERATE_DOC);
  cls.def(
      "chat",
      [](nb::handle self, nb::handle messages, RLX_PY_GENERATE_ARGS, bool stream) {
        return nb::cast<LLM&>(self).chat(self, messages, RLX_PY_GEN_ARGS, stream);
      },
      "messages"_a, nb::kw_only(), RLX_PY_GENERATE_KWARGS, "stream"_a = false,
      nb::sig("def chat(self, messages: list[dict[str, str]], *, max_tokens: int = 128, temperature: float = 0.0, "
              "top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, repeat_penalty: float = 1.0, "
              "repeat_last_n: int = 64, presence_penalty: float = 0.0, frequency_penalty: float = 0.0, "
              "stop: str | list[str] | None = None, stop_ids: list[int] = [], seed: int | None = None, "
              "ignore_eos: bool = False, stream: bool = False) -> Generation | GenerationStream"),
      "The assistant's reply to `messages` (dicts with 'role' and 'content'), rendered in the model's chat "
      "template; the reply ends at the template's end of turn." RLX_PY_GENERATE_DOC);
  cls.def(
      "generate_batch",
      [](nb::handle self, nb::handle prompts, RLX_PY_GENERATE_ARGS) {
        return nb::cast<LLM&>(self).generate_batch(prompts, RLX_PY_GEN_ARGS);
      },
      "prompts"_a, nb::kw_only(), RLX_PY_GENERATE_KWARGS,
      nb::sig("def generate_batch(self, prompts: list[str | list[int]], *, max_tokens: int = 128, "
              "temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, "
              "repeat_penalty: float = 1.0, repeat_last_n: int = 64, presence_penalty: float = 0.0, "
              "frequency_penalty: float = 0.0, stop: str | list[str] | None = None, stop_ids: list[int] = [], "
              "seed: int | None = None, ignore_eos: bool = False) -> list[Generation]"),
      "One reply per prompt, in order, generated together through the engine (max_sequences at a time)."
      RLX_PY_GENERATE_DOC);
#undef RLX_PY_GENERATE_KWARGS
#undef RLX_PY_GENERATE_ARGS
#undef RLX_PY_GEN_ARGS
#undef RLX_PY_GENERATE_DOC
  cls.def("apply_chat_template", &LLM::apply_chat_template, "messages"_a, "add_generation_prompt"_a = true,
          nb::sig("def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) "
                  "-> str"),
          "The prompt text for `messages` in the model's chat template.");
  cls.def_prop_ro(
      "tokenizer", [](nb::handle self) { return nb::cast<LLM&>(self).tokenizer(self); },
      "The model's tokenizer (encode / decode).");
  cls.def("prepare", &LLM::prepare,
          "Compiles now every graph that generation would otherwise compile on first use.");
  cls.def_prop_ro("ctx_size", &LLM::ctx_size, "Tokens one sequence can hold (prompt and reply).");
  cls.def_prop_ro("max_sequences", &LLM::max_sequences, "Replies that can be generated at once.");
  cls.def_prop_ro("vocab_size", &LLM::vocab_size);
  cls.def_prop_ro("eos_id", &LLM::eos_id);
  cls.def_prop_ro("chat_template", &LLM::chat_template, "The model's chat template ('' without one).");
  cls.def_prop_ro("backend", &LLM::backend, "How the decode step runs (device, mode).");
  cls.def_prop_ro("device", &LLM::device);
  cls.def("__repr__", &LLM::repr);
}

}  // namespace rlx_py
