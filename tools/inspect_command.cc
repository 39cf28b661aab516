// `rlx inspect`: what the compiler makes of a graph.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "models/bert.h"
#include "models/encoder_demo.h"
#include "rlx/session.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace {

std::string mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / (1 << 20));
  return buf;
}

// Histogram, memory plan and (optionally) the schedule of a compiled graph.
void print_report(const rlx::CompileReport& r, bool schedule) {
  for (auto& [k, n] : r.thunk_histogram) std::cout << "  " << k << ": " << n << "\n";
  std::cout << "arena: " << mib(r.arena_bytes) << " (params " << mib(r.param_bytes) << ")\n";
  std::cout << "scratch: " << mib(r.scratch_bytes) << " for intermediates that would take "
            << mib(r.intermediate_bytes) << " without reuse (peak live " << mib(r.peak_live_bytes) << ")\n";
  if (schedule) std::cout << "schedule:\n" << r.schedule;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Compile a graph and print its schedule and memory plan");
  auto shape = std::make_shared<rlx::EncoderShape>();
  auto no_fuse = std::make_shared<bool>(false);
  auto full = std::make_shared<bool>(false);
  auto model = std::make_shared<std::string>();
  cmd->add_option("--model", *model, "a Hugging Face BERT directory instead of the demo encoder");
  cmd->add_option("--layers", shape->layers, "encoder layers of the demo graph");
  cmd->add_option("--hidden", shape->hidden, "hidden size");
  cmd->add_option("--heads", shape->heads, "attention heads");
  cmd->add_option("--ffn", shape->ffn, "feed-forward size");
  cmd->add_option("--batch", shape->batch, "batch");
  cmd->add_option("--seq", shape->seq, "sequence length");
  cmd->add_flag("--no-fuse", *no_fuse, "skip the fusion passes");
  cmd->add_flag("--schedule", *full, "print every thunk");
  cmd->callback([=] {
    check_batch_seq(shape->batch, shape->seq);
    if (!model->empty()) {  // the real model's graph at --batch x --seq
      rlx::BertConfig cfg = rlx::load_bert_config(*model);
      // A config that disagrees with its weights fails here, before any graph is built.
      auto weights = std::filesystem::path(*model) / "model.safetensors";
      if (std::filesystem::exists(weights)) rlx::BertWeights(weights.string()).check_sizes(cfg);
      rlx::Graph g = rlx::build_bert_graph(cfg, rlx::load_sentence_config(*model).pooling, shape->batch,
                                           shape->seq, rlx::DType::F32);
      rlx::CompileOptions o;
      o.device = rlx::Device::Cpu;
      o.fuse = !*no_fuse;
      auto exe = rlx::compile(g, o);
      const auto& r = exe->report();
      std::cout << "graph: " << *model << " (" << cfg.num_hidden_layers << " layers, hidden " << cfg.hidden_size
                << "), batch " << shape->batch << ", seq " << shape->seq << "\n";
      std::cout << "nodes: " << r.nodes_before << " before passes, " << r.nodes_after << " after\n";
      std::cout << "thunks: " << r.thunk_count << "\n";
      print_report(r, *full);
      return;
    }
    rlx::Graph g = rlx::build_encoder_demo(*shape);
    rlx::CompileOptions o;
    o.device = rlx::Device::Cpu;
    o.fuse = !*no_fuse;
    auto exe = rlx::compile(g, o);
    const auto& r = exe->report();
    std::cout << "graph: BERT-shaped encoder, " << shape->layers << " layers, hidden " << shape->hidden
              << ", heads " << shape->heads << ", ffn " << shape->ffn << ", batch " << shape->batch
              << ", seq " << shape->seq << "\n";
    std::cout << "nodes: " << r.nodes_before << " before passes, " << r.nodes_after << " after\n";
    // Thunks per encoder layer: the difference to the same graph with no layers.
    rlx::EncoderShape none = *shape;
    none.layers = 0;
    size_t base = rlx::compile(rlx::build_encoder_demo(none), o)->report().thunk_count;
    std::cout << "thunks: " << r.thunk_count << " (" << base << " outside the layers, "
              << double(r.thunk_count - base) / std::max(shape->layers, 1) << " per encoder layer)\n";
    print_report(r, *full);
  });
}
