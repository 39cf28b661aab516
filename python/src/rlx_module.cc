// rlx._rlx, the extension module behind the `rlx` Python package: a thin
// layer over the public C++ API (rlx/embedder.h, rlx/llm.h).
#include <nanobind/nanobind.h>

#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx_py {
namespace nb = nanobind;
void bind_embedder(nb::module_& m);
void bind_cross_encoder(nb::module_& m);
void bind_llm(nb::module_& m);
}  // namespace rlx_py

NB_MODULE(_rlx, m) {
  namespace nb = nanobind;
  m.doc() = "rlx: transformer inference (sentence embeddings, reranking, text generation) from Python.";
  // rlx::Error (a bad model file, a request rlx refuses) carries rlx's message.
  nb::exception<rlx::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("__version__") = rlx::version();
  rlx_py::bind_embedder(m);
  rlx_py::bind_cross_encoder(m);
  rlx_py::bind_llm(m);
}
