// rlx.CrossEncoder: rlx::Embedder's score() shaped like sentence-transformers'
// CrossEncoder (predict pairs to a float32 array, rank documents for a
// query). The model, its prompt and its activation are rlx's; this file only
// moves strings in and floats out.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding_util.h"
#include "rlx/embedder.h"
#include "rlx/error.h"

namespace rlx_py {
namespace {

using namespace nb::literals;
using Vector = nb::ndarray<nb::numpy, float, nb::ndim<1>, nb::c_contig>;

std::string type_of(nb::handle h) { return nb::type_name(h.type()).c_str(); }

// Any iterable as a list (one pass over a generator); `what` names it in the error.
nb::list as_list(nb::handle items, const std::string& what) {
  if (!PyObject_HasAttrString(items.ptr(), "__iter__"))
    throw nb::type_error((what + " must be a list, not " + type_of(items)).c_str());
  return nb::steal<nb::list>(PySequence_List(items.ptr()));
}

std::string text_of(nb::handle h, const std::string& what) {
  if (!nb::isinstance<nb::str>(h)) throw nb::type_error((what + " is " + type_of(h) + ", not str").c_str());
  return nb::cast<std::string>(h);
}

struct Pairs {
  std::vector<std::string> queries, documents;
  bool single = false;  // one (query, document) pair given bare: a scalar back, as sentence-transformers
};

// A list of (query, document) pairs, or one pair; sentence-transformers
// tells them apart by whether the first item is itself a pair.
Pairs pair_list(nb::handle input) {
  if (nb::isinstance<nb::str>(input))
    throw nb::type_error("predict: pairs must be a list of (query, document) pairs, not one str");
  nb::list items = as_list(input, "predict: pairs");
  Pairs out;
  auto add = [&out](nb::handle pair, const std::string& name) {
    if (nb::isinstance<nb::str>(pair) || !PyObject_HasAttrString(pair.ptr(), "__iter__"))
      throw nb::type_error((name + " is " + type_of(pair) + ", not a (query, document) pair").c_str());
    nb::list texts = as_list(pair, name);
    if (texts.size() != 2)
      throw nb::value_error((name + " has " + std::to_string(texts.size()) + " items; a pair is (query, document)")
                                .c_str());
    out.queries.push_back(text_of(texts[0], name + "[0]"));
    out.documents.push_back(text_of(texts[1], name + "[1]"));
  };
  if (items.size() > 0 && nb::isinstance<nb::str>(items[0])) {
    out.single = true;
    add(items, "predict: pairs");
    return out;
  }
  for (size_t i = 0; i < items.size(); ++i) add(items[i], "predict: pairs[" + std::to_string(i) + "]");
  return out;
}

class CrossEncoder {
 public:
  CrossEncoder(const std::string& model, const std::string& device, const std::string& dtype, int threads,
               std::optional<int> max_length, std::optional<std::string> prompt, std::optional<std::string> prompt_name,
               std::optional<std::string> recipe, std::optional<std::string> quantize) {
    const std::string path = model_path(model);
    if (threads < 0) throw nb::value_error("threads must be >= 0 (0: every physical core)");
    if (max_length && *max_length < 0) throw nb::value_error("max_length must be >= 0 (0: the model's own limit)");
    rlx::EmbedderOptions o;
    set_device_and_quantize(o, device, quantize);
    o.dtype = parse_dtype(dtype);
    o.threads = threads;
    o.max_len = max_length.value_or(0);
    o.prompt = prompt;
    o.prompt_name = prompt_name.value_or("");
    o.reranker_recipe = recipe.value_or("");
    device_ = o.device;
    dtype_ = o.dtype;
    int8_ = o.int8_products;
    path_ = path;
    nb::gil_scoped_release release;
    embedder_ = std::make_unique<rlx::Embedder>(path, o);
    // An embedding model loads as an Embedder; refuse it here, with rlx's
    // reason (score() says what the directory is and what would make it score).
    if (!embedder_->is_cross_encoder()) {
      embedder_->score("", {});
      throw rlx::Error("'" + path + "' is not a cross-encoder: it cannot score pairs");
    }
  }

  nb::object predict(nb::handle input, std::optional<std::string> prompt_name, std::optional<std::string> prompt,
                     int batch_size, bool show_progress_bar, bool activation) {
    Pairs p = pair_list(input);
    Vector scores = run(p.queries, p.documents, call_of(prompt_name, prompt, batch_size), activation,
                        show_progress_bar);
    nb::object out = nb::cast(scores);
    if (p.single) return out[0];  // one bare pair: a numpy float32 scalar
    return out;
  }

  nb::list rank(nb::handle query, nb::handle documents, std::optional<int64_t> top_k, bool return_documents,
                std::optional<std::string> prompt_name, std::optional<std::string> prompt, int batch_size,
                bool show_progress_bar, bool activation) {
    const std::string q = text_of(query, "rank: query");
    if (nb::isinstance<nb::str>(documents))
      throw nb::type_error("rank: documents must be a list of str, not one str");
    nb::list items = as_list(documents, "rank: documents");
    std::vector<std::string> docs;
    for (size_t i = 0; i < items.size(); ++i)
      docs.push_back(text_of(items[i], "rank: documents[" + std::to_string(i) + "]"));
    if (top_k && *top_k < 0)
      throw nb::value_error(("rank: top_k must be >= 0 or None, not " + std::to_string(*top_k)).c_str());
    Vector scores = run(std::vector<std::string>(docs.size(), q), docs, call_of(prompt_name, prompt, batch_size),
                        activation, show_progress_bar);
    // Best first; equal scores keep the documents' order (Python's stable sorted()).
    std::vector<size_t> order(docs.size());
    std::iota(order.begin(), order.end(), 0);
    const float* s = scores.data();
    std::stable_sort(order.begin(), order.end(), [s](size_t a, size_t b) { return s[a] > s[b]; });
    if (top_k && size_t(*top_k) < order.size()) order.resize(size_t(*top_k));
    nb::list out;
    for (size_t i : order) {
      nb::dict row;
      row["corpus_id"] = i;
      row["score"] = double(s[i]);
      if (return_documents) row["text"] = items[i];
      out.append(row);
    }
    return out;
  }

  int max_length() const { return embedder_->max_len(); }
  int num_labels() const { return embedder_->info().num_labels; }
  std::string activation() const { return embedder_->info().score_activation; }
  bool takes_prompt() const { return embedder_->info().pair_prompt; }
  const rlx::EmbeddingTokenizer& tokenizer() const { return embedder_->tokenizer(); }
  std::string device() const { return device_name(device_); }
  std::string dtype() const { return std::string(rlx::dtype_name(dtype_)); }
  std::optional<std::string> quantize() const { return int8_ ? std::optional<std::string>("int8") : std::nullopt; }
  std::string repr() const {
    return "CrossEncoder('" + path_ + "', device='" + device() + "', dtype='" + dtype() +
           "', max_length=" + std::to_string(max_length()) + ", activation='" + activation() + "'" +
           (int8_ ? ", quantize='int8'" : "") + ")";
  }

 private:
  static rlx::EmbedCall call_of(std::optional<std::string> prompt_name, std::optional<std::string> prompt,
                                int batch_size) {
    rlx::EmbedCall call;
    call.max_batch = batch_bucket(batch_size);
    call.prompt_name = prompt_name.value_or("");
    call.prompt = std::move(prompt);
    return call;
  }

  // The score of each (queries[i], documents[i]), in order, a few batches
  // at a time: Ctrl-C and the progress line get a turn between runs.
  Vector run(const std::vector<std::string>& queries, const std::vector<std::string>& documents,
             const rlx::EmbedCall& call, bool activation, bool show_progress_bar) {
    const size_t n = queries.size();
    float* data = new_floats(n);
    nb::capsule owner = owner_of(data);
    const size_t step = size_t(call.max_batch) * 8;
    for (size_t start = 0; start < n; start += step) {
      const size_t end = std::min(n, start + step);
      {
        nb::gil_scoped_release release;
        std::vector<std::pair<std::string, std::string>> pairs;
        for (size_t i = start; i < end; ++i) pairs.emplace_back(queries[i], documents[i]);
        const std::vector<float> got =
            activation ? embedder_->score_pairs(pairs, call) : embedder_->logits_pairs(pairs, call);
        std::copy(got.begin(), got.end(), data + start);
      }
      if (show_progress_bar) PySys_WriteStderr("\rrlx predict: %zu/%zu%s", end, n, end == n ? "\n" : "");
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    return Vector(data, {n}, owner);
  }

  std::unique_ptr<rlx::Embedder> embedder_;
  rlx::Device device_ = rlx::Device::Cpu;
  rlx::DType dtype_ = rlx::DType::F32;
  bool int8_ = false;
  std::string path_;
};

}  // namespace

void bind_cross_encoder(nb::module_& m) {
  nb::class_<CrossEncoder>(m, "CrossEncoder",
                           "Scores of (query, document) pairs from a cross-encoder: a Hugging Face "
                           "*ForSequenceClassification directory with one label (BERT, RoBERTa, DistilBERT, "
                           "XLM-R, ModernBERT), or a causal LM saved by sentence-transformers with a LogitScore "
                           "module (Qwen3-Reranker), or one published as a plain causal LM given its `recipe`; "
                           "shaped like sentence_transformers.CrossEncoder.")
      .def(nb::init<const std::string&, const std::string&, const std::string&, int, std::optional<int>,
                    std::optional<std::string>, std::optional<std::string>, std::optional<std::string>,
                    std::optional<std::string>>(),
           "model"_a, "device"_a = "auto", "dtype"_a = "f32", "threads"_a = 0, "max_length"_a = nb::none(),
           "prompt"_a = nb::none(), "prompt_name"_a = nb::none(), "recipe"_a = nb::none(), "quantize"_a = nb::none(),
           "Loads the cross-encoder in `model` (a directory, or a Hub id such as "
           "'cross-encoder/ms-marco-MiniLM-L6-v2' already in the local Hugging Face cache). device: 'auto' "
           "(CUDA where present, else the CPU), 'cpu' or 'cuda'; dtype: 'f32', 'f16' or 'bf16'; threads: CPU "
           "threads (0: every physical core); max_length: tokens per pair (None or 0: the model's own limit; "
           "longer pairs are cut). prompt / prompt_name: a causal-LM cross-encoder's instruction (its system "
           "message), the text or a name in config_sentence_transformers.json; prompt overrides prompt_name, "
           "\"\" is none, and a sequence-classification model refuses either. recipe: how to score a reranker "
           "published as a plain causal LM ('qwen3-reranker'). quantize: None, or 'int8' for the products over "
           "weights in int8 on the CPU (AVX512-VNNI; scores within ~1e-2 of f32's). An embedding model is an "
           "rlx.Error saying so.")
      .def("predict", &CrossEncoder::predict, "pairs"_a, "prompt_name"_a = nb::none(), "prompt"_a = nb::none(),
           "batch_size"_a = 32, "show_progress_bar"_a = false, nb::kw_only(), "activation"_a = true,
           nb::sig("def predict(self, pairs: collections.abc.Iterable[collections.abc.Sequence[str]] | "
                   "collections.abc.Sequence[str], prompt_name: str | None = None, prompt: str | None = None, "
                   "batch_size: int = 32, show_progress_bar: bool = False, *, activation: bool = True) -> "
                   "numpy.typing.NDArray[numpy.float32] | numpy.float32"),
           "One score per (query, document) pair, in order: a float32 array [len(pairs)] (a scalar for one bare "
           "pair; [] for none). activation=True applies the model's activation as sentence-transformers' "
           "predict does by default (sigmoid for one label unless the model's config says otherwise); False "
           "gives the logits (activation_fn=torch.nn.Identity()). prompt / prompt_name: this call's instruction "
           "in place of the one given at load (causal-LM cross-encoders only). batch_size: pairs per run (a "
           "power of two; others run as the power of two below). Pairs longer than max_length are cut. The GIL "
           "is released while the model runs.")
      .def("rank", &CrossEncoder::rank, "query"_a, "documents"_a, "top_k"_a = nb::none(),
           "return_documents"_a = false, "prompt_name"_a = nb::none(), "prompt"_a = nb::none(),
           "batch_size"_a = 32, "show_progress_bar"_a = false, nb::kw_only(), "activation"_a = true,
           nb::sig("def rank(self, query: str, documents: collections.abc.Iterable[str], top_k: int | None = None, "
                   "return_documents: bool = False, prompt_name: str | None = None, prompt: str | None = None, "
                   "batch_size: int = 32, show_progress_bar: bool = False, *, activation: bool = True) -> "
                   "list[dict[str, int | float | str]]"),
           "The documents by their score for `query`, best first, as sentence-transformers' rank: a list of "
           "{'corpus_id': index in documents, 'score': float} (with 'text': the document when "
           "return_documents), the top_k best when given; equal scores keep the documents' order. The other "
           "arguments are predict's.")
      .def_prop_ro("max_length", &CrossEncoder::max_length, "Tokens per pair, special tokens included.")
      .def_prop_ro("num_labels", &CrossEncoder::num_labels)
      .def_prop_ro("activation", &CrossEncoder::activation,
                   "What predict applies to the logits by default: 'sigmoid' or 'identity'.")
      .def_prop_ro("takes_prompt", &CrossEncoder::takes_prompt,
                   "Whether the model takes a prompt (a causal-LM cross-encoder's instruction).")
      .def_prop_ro("tokenizer", &CrossEncoder::tokenizer, nb::rv_policy::reference_internal)
      .def_prop_ro("device", &CrossEncoder::device)
      .def_prop_ro("dtype", &CrossEncoder::dtype)
      .def_prop_ro("quantize", &CrossEncoder::quantize, "'int8' when the products run in int8, else None.")
      .def("__repr__", &CrossEncoder::repr);
}

}  // namespace rlx_py
