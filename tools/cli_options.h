// Parsing of the options several subcommands share.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "rlx/session.h"

rlx::DType dtype_option(const std::string& s);     // f32 | f16 | bf16
rlx::Device device_option(const std::string& s);   // auto | cpu | cuda | cuda:N (CUDA must be present)
int device_index_option(const std::string& s);     // N of cuda:N, else 0
CLI::Validator device_choices();                   // the --device values device_option reads
std::vector<std::string> split_list(const std::string& s);  // "a,b,c" -> {a, b, c}
// A GPU named in a list option (--devices): N or cuda:N, else rlx::Error naming the option.
int gpu_index_option(const std::string& option, const std::string& entry);
rlx::ExecMode mode_option(const std::string& s);   // auto | perop | graph
// An encoder command's --quantize: "" (none) or "int8" (int8 products on the
// CPU: true). --device auto then means the CPU, where int8 runs.
bool int8_option(const std::string& quantize);
rlx::Device device_option(const std::string& device, bool int8);
inline constexpr const char* kQuantizeInt8Help =
    "int8: the products over weights in int8 on the CPU (weights per output column, activations per token; "
    "AVX512-VNNI), with --dtype bf16 the fastest; embeddings within ~1e-2 of f32's";

// --batch and --seq of the commands that compile a fixed shape: positive,
// batch <= 1024, seq <= 65536 and at most 2^20 tokens in all, so that a typo
// fails with a message instead of allocating an arena of many gigabytes.
void check_batch_seq(int64_t batch, int64_t seq);
// A CLI11 check that a number option is finite and >= 0: "-5 must be >= 0".
CLI::Validator non_negative();
// A count option (--runs, --warmup ...) in [lo, hi], else rlx::Error naming it.
void check_count(const char* option, int64_t value, int64_t lo, int64_t hi);

// The decoder model under models/ that `generate` and `chat` use by default.
inline constexpr const char* kDefaultDecoderModel = "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
// --model as a model path: "" is the default model (beside the executable's
// ../models or ./models); a directory holding exactly one .gguf file stands
// for that file; a Hugging Face directory (config.json) is itself.
std::string decoder_model_path(const std::string& model);

// The embedding model `embed` uses without --model: $RLX_MODEL_DIR, then
// models/all-MiniLM-L6-v2 beside the executable's ../models or ./models.
std::string default_embed_model_dir();
