// Generates a reply with an installed rlx: the model's chat template, the
// text streamed as it comes, then the finish reason and token count.
//   generate_text MODEL.gguf "a question" [max_tokens]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "rlx/llm.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    rlx::LLM llm(argv[1], {.ctx_size = 512, .max_sequences = 1});
    auto seq = llm.new_sequence();
    rlx::GenerateOptions o;
    o.max_tokens = argc > 3 ? std::atoi(argv[3]) : 32;
    o.sampling.seed = 1;
    const rlx::Generation g = llm.chat(*seq, {{"user", argv[2]}}, o, [](const rlx::TextPiece& p) {
      std::fwrite(p.text.data(), 1, p.text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("\nfinish %s, %zu tokens, rlx %s\n", rlx::finish_reason_name(g.finish), g.ids.size(), rlx::version());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate_text: %s\n", e.what());
    return 1;
  }
  return 0;
}
