// The embedder's declaration is public: include/rlx/embedder.h. In-tree code
// that includes this header also gets the model types it is built on.
#pragma once
#include "models/bert.h"
#include "models/hf_config.h"
#include "rlx/embedder.h"
#include "rlx/session.h"

namespace rlx {

// Threads one embed call tokenizes `texts` texts on: one per 512 texts, at
// most 8 and the processor's threads; on the CPU no more than `threads`
// (EmbedderOptions::threads, 0 = any).
size_t embed_tokenize_threads(size_t texts, Device device, int threads);

}  // namespace rlx
