#!/usr/bin/env python3
"""tests/data/moe/qwen3_moe_tiny.gguf: the transformers checkpoint in
tests/data/moe/qwen3_moe_tiny as llama.cpp's converter names and lays out a
qwen3moe GGUF (stacked blk.N.ffn_*_exps.weight experts), with the types a
quantized file mixes: Q8_0 gate/up experts, BF16 down experts, F16
attention, F32 norms, router and embedding. rlx dequantizes the Q8_0
experts at load; moe_family_test.cc's reference reads the same values.

    pip install gguf numpy safetensors
    python3 tests/data/make_moe_gguf.py
"""
import json
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize
from safetensors.numpy import load_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "tests" / "data" / "moe" / "qwen3_moe_tiny"
OUT = ROOT / "tests" / "data" / "moe" / "qwen3_moe_tiny.gguf"

cfg = json.loads((SRC / "config.json").read_text())
t = load_file(str(SRC / "model.safetensors"))
L, E = cfg["num_hidden_layers"], cfg["num_local_experts"]

w = gguf.GGUFWriter(str(OUT), "qwen3moe")
a = "qwen3moe."
w.add_uint32(a + "context_length", cfg["max_position_embeddings"])
w.add_uint32(a + "embedding_length", cfg["hidden_size"])
w.add_uint32(a + "feed_forward_length", cfg["intermediate_size"])
w.add_uint32(a + "block_count", L)
w.add_uint32(a + "attention.head_count", cfg["num_attention_heads"])
w.add_uint32(a + "attention.head_count_kv", cfg["num_key_value_heads"])
w.add_uint32(a + "attention.key_length", cfg["head_dim"])
w.add_uint32(a + "attention.value_length", cfg["head_dim"])
w.add_float32(a + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
w.add_float32(a + "rope.freq_base", cfg["rope_parameters"]["rope_theta"])
w.add_uint32(a + "expert_count", E)
w.add_uint32(a + "expert_used_count", cfg["num_experts_per_tok"])
w.add_uint32(a + "expert_feed_forward_length", cfg["moe_intermediate_size"])


def put(name, x, qtype=T.F32):
    if qtype == T.F32:
        w.add_tensor(name, x.astype(np.float32))
    elif qtype == T.F16:
        w.add_tensor(name, x.astype(np.float16))
    else:
        w.add_tensor(name, quantize(x.astype(np.float32), qtype), raw_dtype=qtype)


put("token_embd.weight", t["model.embed_tokens.weight"])
put("output_norm.weight", t["model.norm.weight"])
for l in range(L):
    hf, p = f"model.layers.{l}.", f"blk.{l}."
    put(p + "attn_norm.weight", t[hf + "input_layernorm.weight"])
    put(p + "ffn_norm.weight", t[hf + "post_attention_layernorm.weight"])
    put(p + "attn_q_norm.weight", t[hf + "self_attn.q_norm.weight"])
    put(p + "attn_k_norm.weight", t[hf + "self_attn.k_norm.weight"])
    for ours, theirs in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
        put(p + ours + ".weight", t[hf + "self_attn." + theirs + ".weight"], T.F16)
    if hf + "mlp.gate.weight" not in t:  # a dense layer (mlp_only_layers)
        for ours in ("gate", "up", "down"):
            put(p + f"ffn_{ours}.weight", t[hf + f"mlp.{ours}_proj.weight"], T.F16)
        continue
    put(p + "ffn_gate_inp.weight", t[hf + "mlp.gate.weight"])
    for ours, qtype in (("gate", T.Q8_0), ("up", T.Q8_0), ("down", T.BF16)):
        stacked = np.stack([t[hf + f"mlp.experts.{e}.{ours}_proj.weight"] for e in range(E)])
        put(p + f"ffn_{ours}_exps.weight", stacked, qtype)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
