#!/usr/bin/env python3
"""Writes tests/data/smollm2_reference.json: the greedy continuation of a fixed
prompt by SmolLM2-135M-Instruct (the default GGUF, Q4_1), computed without
rlx: the `gguf` package dequantizes the weights, and a NumPy LLaMA forward
pass in float64 (llama_numpy.py) recomputes the whole prefix for each token.

    pip install gguf numpy tokenizers
    python3 tests/data/make_smollm2_reference.py
"""
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llama_numpy import GgufLlama  # noqa: E402
from smollm2_hf_tokenizer import GGUF, ROOT, smollm2_tokenizer  # noqa: E402

OUT = ROOT / "tests" / "data" / "smollm2_reference.json"
PROMPT = "The three primary colors are"
NEW_TOKENS = 32

model = GgufLlama(GGUF)
tok = smollm2_tokenizer()
prompt_ids = tok.encode(PROMPT).ids
ids = list(prompt_ids)
generated, margins, first_logits = [], [], None
for step in range(NEW_TOKENS):
    logits = model.next_logits(ids)
    if step == 0:
        first_logits = logits
    top2 = np.sort(logits)[-2:]
    margins.append(float(top2[1] - top2[0]))
    nxt = int(np.argmax(logits))
    generated.append(nxt)
    ids.append(nxt)
    print(step, nxt, repr(tok.decode([nxt])), f"margin {margins[-1]:.3f}", flush=True)

probe = list(range(0, 49152, 997)) + [int(i) for i in np.argsort(first_logits)[-5:]]
OUT.write_text(json.dumps({
    "model": GGUF.name,
    "prompt": PROMPT,
    "prompt_ids": prompt_ids,
    "generated_ids": generated,
    "generated_text": tok.decode(generated),
    "min_top2_margin": min(margins),
    "first_step_logits": {str(i): float(first_logits[i]) for i in probe},
}, indent=1) + "\n")
print(f"wrote {OUT}: {tok.decode(generated)!r}")
