// libFuzzer: any bytes as a Hugging Face decoder's config.json. Reading it
// fails with rlx::Error or gives sizes inside LlamaLimits, finite floats in
// their domain, and as many rope divisors as rotated pairs.
#include <cmath>
#include <cstdlib>

#include "fuzz_files.h"
#include "models/llama.h"
#include "models/llama_limits.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = rlx::fuzz::scratch_dir() / "config.json";
  rlx::fuzz::write_file(path, data, size);
  try {
    const rlx::LlamaConfig c = rlx::load_llama_config(path.string());
    const rlx::LlamaLimits L;
    if (c.num_layers < 1 || c.num_layers > L.layers || c.hidden_size < 1 || c.hidden_size > L.hidden_size ||
        c.intermediate_size < 1 || c.intermediate_size > L.intermediate_size || c.num_heads < 1 ||
        c.num_heads > L.heads || c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0 || c.head_dim < 1 ||
        c.head_dim > L.head_dim || c.vocab_size < 1 || c.vocab_size > L.vocab || c.max_positions < 1 ||
        c.max_positions > L.positions || !(c.rms_eps > 0.f && c.rms_eps < 1.f) || !(c.rope_theta > 0.f) ||
        !std::isfinite(c.rope_theta))
      std::abort();
    if (!c.rope_freq_divisors.empty() && int(c.rope_freq_divisors.size()) != c.rope_dims / 2) std::abort();
  } catch (const rlx::Error&) {
  }
  return 0;
}
