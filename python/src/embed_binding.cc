// rlx.SentenceEncoder: rlx::Embedder shaped like sentence-transformers'
// SentenceTransformer (encode to a float32 array, similarity, tokenizer).
// The model runs in rlx; this file only moves strings in and floats out.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "binding_util.h"
#include "rlx/embedder.h"

namespace rlx_py {
namespace {

using namespace nb::literals;
using Matrix = nb::ndarray<nb::numpy, float, nb::ndim<2>, nb::c_contig>;
using Vector = nb::ndarray<nb::numpy, float, nb::ndim<1>, nb::c_contig>;

// A str, or an iterable of str; anything else names what it got.
std::vector<std::string> sentence_list(nb::handle sentences) {
  std::vector<std::string> out;
  if (nb::isinstance<nb::str>(sentences)) {
    out.push_back(nb::cast<std::string>(sentences));
    return out;
  }
  if (!PyObject_HasAttrString(sentences.ptr(), "__iter__"))
    throw nb::type_error(("encode: sentences must be a str or a list of str, not " +
                          std::string(nb::type_name(sentences.type()).c_str()))
                             .c_str());
  size_t i = 0;
  for (nb::handle item : sentences) {
    if (!nb::isinstance<nb::str>(item))
      throw nb::type_error(("encode: sentences[" + std::to_string(i) + "] is " +
                            std::string(nb::type_name(item.type()).c_str()) + ", not str")
                               .c_str());
    out.push_back(nb::cast<std::string>(item));
    ++i;
  }
  return out;
}

class SentenceEncoder {
 public:
  SentenceEncoder(const std::string& model, const std::string& device, const std::string& dtype, int threads,
                  int max_seq_length, std::optional<std::string> quantize) {
    const std::string path = model_path(model);
    if (threads < 0) throw nb::value_error("threads must be >= 0 (0: every physical core)");
    if (max_seq_length < 0) throw nb::value_error("max_seq_length must be >= 0 (0: the model's own limit)");
    rlx::EmbedderOptions o;
    set_device_and_quantize(o, device, quantize);
    o.dtype = parse_dtype(dtype);
    o.threads = threads;
    o.max_len = max_seq_length;
    device_ = o.device;
    dtype_ = o.dtype;
    int8_ = o.int8_products;
    path_ = path;
    nb::gil_scoped_release release;
    embedder_ = std::make_unique<rlx::Embedder>(path, o);
  }

  nb::object encode(nb::handle sentences, int batch_size, std::optional<bool> normalize_embeddings,
                    std::optional<std::string> prompt, bool convert_to_numpy, bool show_progress_bar,
                    std::optional<std::string> convert_to) {
    if (convert_to && *convert_to != "numpy" && *convert_to != "dlpack")
      throw nb::value_error(("encode: convert_to must be None, 'numpy' or 'dlpack', not '" + *convert_to + "'").c_str());
    const bool single = nb::isinstance<nb::str>(sentences);
    std::vector<std::string> texts = sentence_list(sentences);
    const int batch = batch_bucket(batch_size);
    if (prompt)
      for (std::string& t : texts) t = *prompt + t;
    // The model's own Normalize module already applies; True adds one where
    // the model has none (sentence-transformers' normalize_embeddings).
    const bool normalize = normalize_embeddings.value_or(false) && !embedder_->normalizes();
    // On the GPU the rows stay there; on the CPU a numpy array speaks DLPack too.
    if (convert_to == "dlpack" && device_ == rlx::Device::Cuda) return on_device(texts, batch, normalize, single);
    if (convert_to) convert_to_numpy = true;
    const size_t n = texts.size(), dim = size_t(embedder_->dim());
    float* data = new_floats(n * dim);
    nb::capsule owner = owner_of(data);
    // Chunks of a few batches, as `rlx embed` runs them: Ctrl-C and the
    // progress line get a turn between chunks.
    const size_t step = size_t(batch) * 8;
    for (size_t start = 0; start < n; start += step) {
      const size_t end = std::min(n, start + step);
      {
        nb::gil_scoped_release release;
        std::vector<std::string> part(std::make_move_iterator(texts.begin() + long(start)),
                                      std::make_move_iterator(texts.begin() + long(end)));
        std::vector<std::vector<float>> got = embedder_->embed(part, batch);
        for (size_t r = 0; r < got.size(); ++r) {
          if (normalize) rlx::l2_normalize(got[r]);
          std::memcpy(data + (start + r) * dim, got[r].data(), dim * sizeof(float));
        }
      }
      if (show_progress_bar) PySys_WriteStderr("\rrlx encode: %zu/%zu%s", end, n, end == n ? "\n" : "");
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    if (single) return nb::cast(Vector(data, {dim}, owner));
    Matrix m(data, {n, dim}, owner);
    if (convert_to_numpy) return nb::cast(m);
    // sentence-transformers gives a list of vectors here: rows of the array.
    return nb::steal(PySequence_List(nb::cast(m).ptr()));
  }

  // The embeddings in GPU memory as a DLPack capsule, which torch.from_dlpack
  // (or any DLPack consumer) takes without a copy; it owns the memory.
  nb::object on_device(const std::vector<std::string>& texts, int batch, bool normalize, bool single) {
    rlx::DeviceEmbeddings d;
    {
      nb::gil_scoped_release release;
      rlx::EmbedCall call;
      call.max_batch = batch;
      d = embedder_->embed_on_device(texts, call, normalize);
    }
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    auto* keep = new std::shared_ptr<float>(d.data);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<float>*>(p); });
    const size_t shape[2] = {d.rows, d.dim};
    const size_t* dims = single ? shape + 1 : shape;
    return nb::cast(nb::ndarray<float, nb::device::cuda, nb::c_contig>(d.data.get(), single ? 1 : 2, dims, owner,
                                                                       nullptr, nb::dtype<float>(),
                                                                       nb::device::cuda::value, std::max(d.device, 0)));
  }

  int dim() const { return embedder_->dim(); }
  int max_seq_length() const { return embedder_->max_len(); }
  bool normalizes() const { return embedder_->normalizes(); }
  const rlx::EmbeddingTokenizer& tokenizer() const { return embedder_->tokenizer(); }
  std::string repr() const {
    return "SentenceEncoder('" + path_ + "', device='" + device_name(device_) + "', dtype='" +
           std::string(rlx::dtype_name(dtype_)) + "'" + (int8_ ? ", quantize='int8'" : "") +
           ", dim=" + std::to_string(dim()) +
           ", max_seq_length=" + std::to_string(max_seq_length()) + ")";
  }
  std::string device() const { return device_name(device_); }
  std::string dtype() const { return std::string(rlx::dtype_name(dtype_)); }
  std::optional<std::string> quantize() const { return int8_ ? std::optional<std::string>("int8") : std::nullopt; }

 private:
  std::unique_ptr<rlx::Embedder> embedder_;
  rlx::Device device_ = rlx::Device::Cpu;
  rlx::DType dtype_ = rlx::DType::F32;
  bool int8_ = false;
  std::string path_;
};

// Rows of an array-like as a C-contiguous float32 matrix (a vector is one row).
nb::ndarray<const float, nb::c_contig, nb::device::cpu> as_rows(nb::handle x, const char* name) {
  nb::object np = nb::module_::import_("numpy");
  nb::object a = np.attr("ascontiguousarray")(x, "dtype"_a = np.attr("float32"));
  const size_t ndim = nb::cast<size_t>(a.attr("ndim"));
  if (ndim == 1) a = a.attr("reshape")(1, -1);
  else if (ndim != 2)
    throw nb::value_error((std::string("similarity: ") + name + " must be a vector or a matrix, not " +
                           std::to_string(ndim) + "-dimensional")
                              .c_str());
  return nb::cast<nb::ndarray<const float, nb::c_contig, nb::device::cpu>>(a);
}

// Cosine similarity of every row of a with every row of b: [len(a), len(b)].
Matrix similarity(nb::handle a_in, nb::handle b_in) {
  auto a = as_rows(a_in, "a"), b = as_rows(b_in, "b");
  const size_t n = a.shape(0), m = b.shape(0), d = a.shape(1);
  if (b.shape(1) != d)
    throw nb::value_error(("similarity: a has " + std::to_string(d) + " columns, b has " +
                           std::to_string(b.shape(1)))
                              .c_str());
  float* out = new_floats(n * m);
  nb::capsule owner = owner_of(out);
  {
    nb::gil_scoped_release release;
    auto norms = [d](const float* rows, size_t count) {
      std::vector<float> inv(count);
      for (size_t i = 0; i < count; ++i) {
        double ss = 0;
        for (size_t k = 0; k < d; ++k) ss += double(rows[i * d + k]) * rows[i * d + k];
        inv[i] = float(1.0 / std::max(std::sqrt(ss), 1e-12));  // as sentence-transformers clamps
      }
      return inv;
    };
    const std::vector<float> ia = norms(a.data(), n), ib = norms(b.data(), m);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < m; ++j) {
        const float *x = a.data() + i * d, *y = b.data() + j * d;
        float dot = 0;
        for (size_t k = 0; k < d; ++k) dot += x[k] * y[k];
        out[i * m + j] = dot * ia[i] * ib[j];
      }
  }
  return Matrix(out, {n, m}, owner);
}

}  // namespace

void bind_embedder(nb::module_& m) {
  nb::class_<rlx::EmbeddingTokenizer>(m, "EmbeddingTokenizer",
                                      "The encoder's tokenizer (WordPiece for BERT, byte-level BPE for RoBERTa).")
      .def(
          "encode",
          [](const rlx::EmbeddingTokenizer& t, const std::string& text, int max_length) {
            if (max_length < 2) throw nb::value_error("max_length must be >= 2 (the special tokens)");
            return t.encode(text, max_length).ids;
          },
          "text"_a, "max_length"_a = 512, nb::call_guard<nb::gil_scoped_release>(),
          "Token ids of `text` with the model's special tokens ([CLS] ... [SEP]), cut to `max_length` in all.")
      .def(
          "tokenize",
          [](const rlx::EmbeddingTokenizer& t, const std::string& text) {
            std::vector<int32_t> ids = t.encode(text, 1 << 30).ids;
            return ids.size() >= 2 ? std::vector<int32_t>(ids.begin() + 1, ids.end() - 1) : std::vector<int32_t>{};
          },
          "text"_a, nb::call_guard<nb::gil_scoped_release>(), "Token ids of `text`, no special tokens added.")
      .def("decode", &rlx::EmbeddingTokenizer::decode, "ids"_a, "The text of `ids`, special tokens left out.")
      .def("token_id", &rlx::EmbeddingTokenizer::token_id, "token"_a, "The id of a vocabulary entry, -1 when absent.")
      .def_prop_ro("kind", &rlx::EmbeddingTokenizer::kind)
      .def_prop_ro("vocab_size", &rlx::EmbeddingTokenizer::vocab_size)
      .def("__len__", &rlx::EmbeddingTokenizer::vocab_size);

  nb::class_<SentenceEncoder>(m, "SentenceEncoder",
                              "Sentence embeddings from a Hugging Face BERT-family model directory (config.json, "
                              "tokenizer files, model.safetensors, sentence-transformers modules), shaped like "
                              "sentence_transformers.SentenceTransformer.")
      .def(nb::init<const std::string&, const std::string&, const std::string&, int, int, std::optional<std::string>>(),
           "path"_a, "device"_a = "auto", "dtype"_a = "f32", "threads"_a = 0, "max_seq_length"_a = 0,
           "quantize"_a = nb::none(),
           "Loads the model in `path` (a directory, a BERT GGUF file, or a Hub id such as "
           "'sentence-transformers/all-MiniLM-L6-v2' already in the local Hugging Face cache). device: 'auto' "
           "(CUDA where present, else the CPU), 'cpu' or 'cuda'; dtype: 'f32', 'f16' or 'bf16'; threads: CPU "
           "threads (0: every physical core); max_seq_length: tokens per text (0: the model's own limit); "
           "quantize: None, or 'int8' for the products over weights in int8 on the CPU (weights per output "
           "column, activations per token; AVX512-VNNI), fastest with dtype='bf16', embeddings within ~1e-2 "
           "of f32's.")
      .def("encode", &SentenceEncoder::encode, "sentences"_a, "batch_size"_a = 32,
           "normalize_embeddings"_a = nb::none(), "prompt"_a = nb::none(), "convert_to_numpy"_a = true,
           "show_progress_bar"_a = false, "convert_to"_a = nb::none(),
           nb::sig("def encode(self, sentences: str | collections.abc.Iterable[str], batch_size: int = 32, "
                   "normalize_embeddings: bool | None = None, prompt: str | None = None, convert_to_numpy: bool = "
                   "True, show_progress_bar: bool = False, convert_to: str | None = None) -> "
                   "numpy.typing.NDArray[numpy.float32] | list[numpy.typing.NDArray[numpy.float32]] | typing.Any"),
           "One embedding per sentence, in order: a float32 array [len(sentences), dim] (a vector [dim] for one "
           "str). Empty strings are embedded like any other. batch_size: texts per run (a power of two; "
           "others run as the power of two below). normalize_embeddings: True scales each row to unit length "
           "where the model does not already (None/False: as the model's modules say). prompt: text put before "
           "every sentence. convert_to_numpy=False: a list of row vectors. show_progress_bar: a progress line "
           "on stderr. convert_to='dlpack': on the GPU, a DLPack capsule over the rows in device memory for "
           "torch.from_dlpack (no copy; consumed once; pooling must run in the graph: mean or cls, no Dense "
           "module), on the CPU the numpy array; "
           "'numpy': the numpy array. The GIL is released while the model runs, so threads may share one "
           "encoder (its calls run one at a time).")
      .def_static("similarity", &similarity, "a"_a, "b"_a,
                  nb::sig("def similarity(a: numpy.typing.ArrayLike, b: numpy.typing.ArrayLike) -> "
                          "numpy.typing.NDArray[numpy.float32]"),
                  "Cosine similarity of every row of `a` with every row of `b`: a float32 array [len(a), len(b)].")
      .def_prop_ro("tokenizer", &SentenceEncoder::tokenizer, nb::rv_policy::reference_internal)
      .def_prop_ro("max_seq_length", &SentenceEncoder::max_seq_length,
                   "Tokens per text, [CLS] and [SEP] included; longer texts are cut.")
      .def_prop_ro("dim", &SentenceEncoder::dim, "Length of one embedding.")
      .def("get_sentence_embedding_dimension", &SentenceEncoder::dim, "Length of one embedding.")
      .def_prop_ro("normalizes", &SentenceEncoder::normalizes,
                   "Whether the model's own modules end in a Normalize (unit-length rows).")
      .def_prop_ro("device", &SentenceEncoder::device)
      .def_prop_ro("dtype", &SentenceEncoder::dtype)
      .def_prop_ro("quantize", &SentenceEncoder::quantize, "'int8' when the products run in int8, else None.")
      .def("__repr__", &SentenceEncoder::repr);
}

}  // namespace rlx_py
