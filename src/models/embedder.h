// The embedder's declaration is public: include/rlx/embedder.h. In-tree code
// that includes this header also gets the model types it is built on.
#pragma once
#include "models/bert.h"
#include "models/hf_config.h"
#include "rlx/embedder.h"
#include "rlx/session.h"
