#!/usr/bin/env python3
"""Writes tests/data/smollm2_reference.json: the greedy continuation of a fixed
prompt by SmolLM2-135M-Instruct (the default GGUF, Q4_1), computed without
rlx: the `gguf` package dequantizes the weights, and a NumPy LLaMA forward
pass in float64 recomputes the whole prefix for each token. Q and K weights
are un-permuted back to Hugging Face's layout, so RoPE here rotates halves
(dim i with i + head_dim/2), independently of how rlx reads GGUF's layout.

    pip install gguf numpy tokenizers
    python3 tests/data/make_smollm2_reference.py
"""
import json
import pathlib
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from smollm2_hf_tokenizer import GGUF, ROOT, smollm2_tokenizer  # noqa: E402

OUT = ROOT / "tests" / "data" / "smollm2_reference.json"
PROMPT = "The three primary colors are"
NEW_TOKENS = 32

r = gguf.GGUFReader(str(GGUF))


def meta(key):
    return r.fields[key].contents()


H = meta("llama.embedding_length")
L = meta("llama.block_count")
NH = meta("llama.attention.head_count")
NKV = meta("llama.attention.head_count_kv")
HD = H // NH
EPS = meta("llama.attention.layer_norm_rms_epsilon")
THETA = meta("llama.rope.freq_base")
W = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64).reshape([int(d) for d in reversed(t.shape)])
     for t in r.tensors}
EMB = W["token_embd.weight"]
HEAD = W.get("output.weight", EMB)


def unpermute(w, heads):
    # GGUF stores rows of each head as (hd/2, 2) pairs; HF as (2, hd/2).
    return w.reshape(heads, HD // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


for l in range(L):
    W[f"blk.{l}.attn_q.weight"] = unpermute(W[f"blk.{l}.attn_q.weight"], NH)
    W[f"blk.{l}.attn_k.weight"] = unpermute(W[f"blk.{l}.attn_k.weight"], NKV)


def rms(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rope(x):  # x: [S, heads, HD], halves rotated
    s = x.shape[0]
    inv = THETA ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def next_logits(ids):
    s = len(ids)
    x = EMB[ids]
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for l in range(L):
        p = f"blk.{l}."
        h = rms(x, W[p + "attn_norm.weight"])
        q = rope((h @ W[p + "attn_q.weight"].T).reshape(s, NH, HD))
        k = rope((h @ W[p + "attn_k.weight"].T).reshape(s, NKV, HD))
        v = (h @ W[p + "attn_v.weight"].T).reshape(s, NKV, HD)
        k = np.repeat(k, NH // NKV, axis=1)
        v = np.repeat(v, NH // NKV, axis=1)
        att = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(HD) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = np.einsum("hqk,khd->qhd", att, v).reshape(s, NH * HD)
        x = x + ctx @ W[p + "attn_output.weight"].T
        h = rms(x, W[p + "ffn_norm.weight"])
        g = h @ W[p + "ffn_gate.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    return rms(x[-1], W["output_norm.weight"]) @ HEAD.T


tok = smollm2_tokenizer()
prompt_ids = tok.encode(PROMPT).ids
ids = list(prompt_ids)
generated, margins, first_logits = [], [], None
for step in range(NEW_TOKENS):
    logits = next_logits(ids)
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
