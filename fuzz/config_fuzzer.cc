// libFuzzer: any bytes as one of a model folder's JSON files (the first
// byte picks which): config.json, modules.json, the pooling module's
// config.json or sentence_bert_config.json. Reading either fails with
// rlx::Error or gives sizes inside BertLimits.
#include <cstdlib>

#include "fuzz_files.h"
#include "models/hf_config.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  namespace fs = std::filesystem;
  const fs::path dir = rlx::fuzz::scratch_dir() / "model";
  static const bool made = [&] {
    fs::create_directories(dir / "1_Pooling");
    return true;
  }();
  (void)made;
  const char* files[] = {"config.json", "modules.json", "1_Pooling/config.json", "sentence_bert_config.json"};
  const int which = data[0] % 4;
  for (int i = 0; i < 4; ++i) fs::remove(dir / files[i]);
  // The pooling config is only read when modules.json names it.
  if (which == 2) {
    const char modules[] = R"([{"type":"sentence_transformers.models.Pooling","path":"1_Pooling"}])";
    rlx::fuzz::write_file(dir / "modules.json", reinterpret_cast<const uint8_t*>(modules), sizeof modules - 1);
  }
  rlx::fuzz::write_file(dir / files[which], data + 1, size - 1);
  try {
    rlx::BertConfig c = rlx::load_bert_config(dir.string());
    const rlx::BertLimits L;
    if (c.hidden_size < 1 || c.hidden_size > L.hidden || c.num_hidden_layers < 1 ||
        c.num_hidden_layers > L.layers || c.hidden_size % c.num_attention_heads != 0)
      std::abort();
  } catch (const rlx::Error&) {
  }
  try {
    rlx::SentenceConfig s = rlx::load_sentence_config(dir.string());
    if (s.max_seq_length < 0) std::abort();
  } catch (const rlx::Error&) {
  }
  return 0;
}
