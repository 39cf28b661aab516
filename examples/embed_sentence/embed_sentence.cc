// Embeds one sentence with a sentence-transformers model directory, using
// only rlx's public headers:  embed_sentence MODEL_DIR "some text"
#include <rlx/embedder.h>
#include <rlx/error.h>

#include <cmath>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR TEXT\n", argv[0]);
    return 2;
  }
  try {
    rlx::Embedder embedder(argv[1]);
    std::vector<float> v = embedder.embed({argv[2]}).at(0);
    double norm = 0;
    for (float x : v) norm += double(x) * x;
    std::printf("dim %zu norm %.4f first %.6f\n", v.size(), std::sqrt(norm), v.at(0));
  } catch (const rlx::Error& e) {
    std::fprintf(stderr, "embed_sentence: %s\n", e.what());
    return 1;
  }
  return 0;
}
