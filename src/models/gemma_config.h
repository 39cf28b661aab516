// Gemma 2 and Gemma 3 (text) mapped onto LlamaConfig: the Hugging Face
// config.json fields transformers' Gemma2Config / Gemma3TextConfig define,
// and the gemma2 / gemma3 GGUF keys llama.cpp reads.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "models/llama.h"

namespace rlx {

class GgufFile;

// model_type gemma2, gemma3_text, or gemma3 (a multimodal config whose
// text_config is the decoder).
bool is_gemma_model_type(const std::string& model_type);
// The decoder of a Gemma config.json (`config` is the whole file); throws
// naming `path` and the field for anything not supported.
LlamaConfig gemma_config_from_hf(const nlohmann::json& config, const std::string& path);
// The gemma2 / gemma3 keys (soft caps, sliding window and its layer
// pattern, local rope base, query scale) on top of the common <arch>.* keys
// llama_config_from_gguf has read into c.
void read_gemma_gguf(const GgufFile& f, LlamaConfig& c);

}  // namespace rlx
