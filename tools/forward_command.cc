// `rlx forward`: one BERT forward pass on given token ids, for comparing
// against a reference implementation. Compiles the model for exactly the
// [batch, seq] of the ids, runs it twice (the second run must repeat the
// first bit for bit) and writes last_hidden_state as raw little-endian f32.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "models/bert.h"
#include "models/json_read.h"
#include "rlx/error.h"
#include "rlx/session.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace {

struct ForwardArgs {
  std::string model, ids, out, dtype = "f32", device = "cpu", mode = "auto", quantize;
};

// A [batch, seq] integer matrix from JSON, every row the same length and
// every value an integer in [lo, hi].
std::vector<int32_t> read_matrix(const rlx::JsonField& j, const char* key, int32_t lo, int32_t hi,
                                 int64_t& batch, int64_t& seq) {
  rlx::JsonField rows = j.at(key);
  RLX_CHECK(rows.size() > 0, rows.where() << "must be a non-empty array of rows");
  int64_t b = int64_t(rows.size()), s = -1;
  std::vector<int32_t> v;
  for (size_t r = 0; r < rows.size(); ++r) {
    rlx::JsonField row = rows.at(r);
    RLX_CHECK(row.size() > 0, row.where() << "must be a non-empty array");
    if (s < 0) s = int64_t(row.size());
    RLX_CHECK(int64_t(row.size()) == s, row.where() << "has " << row.size() << " entries, row 0 has " << s);
    for (size_t i = 0; i < row.size(); ++i) v.push_back(int32_t(row.at(i).integer(lo, hi)));
  }
  RLX_CHECK(batch < 0 || (b == batch && s == seq),
            rows.where() << "is " << b << "x" << s << ", input_ids is " << batch << "x" << seq);
  batch = b;
  seq = s;
  return v;
}

void run_forward(const ForwardArgs& a) {
  const rlx::BertConfig cfg = rlx::load_bert_config(a.model);
  const nlohmann::json doc = rlx::read_json_file(a.ids);
  rlx::JsonField j(doc, a.ids);
  j.object();
  int64_t batch = -1, seq = -1;
  auto ids = read_matrix(j, "input_ids", 0, cfg.vocab_size - 1, batch, seq);
  std::vector<int32_t> mask(ids.size(), 1), types(ids.size(), 0);
  if (j.has("attention_mask")) mask = read_matrix(j, "attention_mask", 0, 1, batch, seq);
  if (j.has("token_type_ids")) {
    RLX_CHECK(cfg.type_vocab_size > 0, "'" << a.ids << "': token_type_ids given, but model_type '"
                                           << cfg.model_type << "' has no token types");
    types = read_matrix(j, "token_type_ids", 0, cfg.type_vocab_size - 1, batch, seq);
  }
  check_batch_seq(batch, seq);

  rlx::BertLoadOptions o;
  o.dtype = dtype_option(a.dtype);
  o.int8_products = int8_option(a.quantize);
  o.device = device_option(a.device, o.int8_products);
  o.mode = mode_option(a.mode);
  o.batch = batch;
  o.seq = seq;
  auto exe = rlx::load_bert(a.model, o);

  std::map<std::string, rlx::HostTensor> inputs{
      {"input_ids", rlx::HostTensor::from_i32({batch, seq}, ids)},
      {"attention_mask", rlx::HostTensor::from_i32({batch, seq}, mask)}};
  if (cfg.type_vocab_size > 0) inputs.emplace("token_type_ids", rlx::HostTensor::from_i32({batch, seq}, types));
  const rlx::HostTensor first = exe->run(inputs).at("last_hidden_state");
  const rlx::HostTensor second = exe->run(inputs).at("last_hidden_state");
  RLX_CHECK(first.bytes.size() == second.bytes.size() &&
                std::memcmp(first.bytes.data(), second.bytes.data(), first.bytes.size()) == 0,
            "forward: the second run of '" << a.model << "' differs from the first (replay is not exact)");

  std::vector<float> h = first.to_f32();
  std::ofstream out(a.out, std::ios::binary);
  RLX_CHECK(out, "cannot write --out '" << a.out << "'");
  out.write(reinterpret_cast<const char*>(h.data()), std::streamsize(h.size() * sizeof(float)));
  RLX_CHECK(out.good(), "writing '" << a.out << "' failed");
  std::printf("rlx forward: last_hidden_state %s (%s, written as f32) to %s\n",
              rlx::shape_str(first.shape).c_str(), a.dtype.c_str(), a.out.c_str());
  std::printf("rlx forward: backend %s, %s; replay bit-exact\n", exe->report().backend.c_str(),
              exe->backend_summary().c_str());
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("forward", "One BERT forward pass on token ids from a JSON file");
  auto a = std::make_shared<ForwardArgs>();
  cmd->add_option("--model", a->model, "model directory (config.json + model.safetensors)")->required();
  cmd->add_option("--ids", a->ids,
                  "JSON file {\"input_ids\": [[...]], \"attention_mask\": [[...]]}, batch x seq")
      ->required();
  cmd->add_option("--out", a->out, "where last_hidden_state goes, raw little-endian f32")->required();
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--quantize", a->quantize, kQuantizeInt8Help)->check(CLI::IsMember({"int8"}));
  cmd->add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--mode", a->mode, "CUDA execution mode: auto, perop or graph")
      ->check(CLI::IsMember({"auto", "perop", "graph"}));
  cmd->callback([a] { run_forward(*a); });
}
