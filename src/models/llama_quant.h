// LLaMA matmul weights held block-quantized (rlx/quant.h): which ones, and
// how loaders fill their params. A quantized weight W (named as GGUF names
// it, e.g. blk.0.attn_q.weight) is two graph params, W.quants and W.scales;
// a sparse layer's expert stack [E, n, k] likewise, with its leading dims
// (on the CPU: the GPU keeps experts in floats so far). A tied token
// embedding whose LM head is quantized is gathered from the head's params
// (gather_q): the table exists once, quantized. An untied embedding stays
// in floats.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/options.h"
#include "rlx/quant.h"
#include "models/param_sink.h"
#include "rlx/session.h"

namespace rlx {

struct LlamaConfig;

// Matmul weight name -> the format its params hold.
using QuantizedWeights = std::map<std::string, QuantType>;

// The weights LLaMA's matmuls read (as [n, k], n outputs of k inputs; the
// experts of sparse layers as [E, n, k]).
std::vector<std::pair<std::string, Shape>> llama_matmul_weights(const LlamaConfig& c);

// Each matmul weight's format: what `stored` says where the file holds it in
// a format the device's kernels read (kept as it is: quant_type_runs_on),
// else `quantize` when set, else floats. A weight whose rows are not a
// multiple of 32 (an expert stack's: it stays floats), or a `quantize` the
// device cannot run, is rlx::Error naming it. Expert stacks only on the CPU.
QuantizedWeights plan_llama_quantization(const LlamaConfig& c,
                                         const std::function<std::optional<QuantType>(const std::string&)>& stored,
                                         std::optional<QuantType> quantize, Device device = Device::Cpu);

// Whether the backend of `device` (Cpu or Cuda) has matmul_q kernels for t:
// the CPU reads every format, CUDA Q8_0, Q4_0 and FP8.
bool quant_type_runs_on(QuantType t, Device device);

// What fills a param of a LLaMA graph: the file tensor (by rlx's name), the
// shape that tensor must have and, for W.quants, W's format (W.scales is
// filled with it and has no entry of its own).
struct LlamaParamSource {
  std::string param, tensor;
  Shape shape;
  std::optional<QuantType> quant;
};
std::vector<LlamaParamSource> llama_param_sources(const Graph& g);

// Fills W.quants and W.scales from W [..., k] in f32, quantized as llama.cpp's
// reference quantizers do (thunks/quant_math.h).
void set_quantized_weight(const ParamSink& sink, const LlamaParamSource& s, const std::vector<float>& w);
// The same from GGUF blocks of W's format (per block: f16 scale(s), then the
// quants), split into quants and scales.
void set_quantized_weight_blocks(const ParamSink& sink, const LlamaParamSource& s, std::span<const uint8_t> blocks);

}  // namespace rlx
