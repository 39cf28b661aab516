#!/usr/bin/env python3
"""tests/data/moe/qwen3_moe_tiny: a random Qwen3-MoE of odd sizes saved by
transformers (5.17: one tensor per expert, num_experts written as
num_local_experts), so the loader is tested on the layout and keys
transformers writes. moe_family_test.cc computes its reference in double
from the saved weights; bench/decoder_parity.py compares with transformers
itself on the GPU machine.

  python3 tests/data/make_moe_fixture.py OUT_DIR
"""
import os
import sys

import torch
import transformers

out = sys.argv[1]
cfg = transformers.Qwen3MoeConfig(
    vocab_size=301, hidden_size=64, intermediate_size=48, moe_intermediate_size=21, num_experts=5,
    num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=2, head_dim=24, tie_word_embeddings=True, rope_theta=10000.0,
    rms_norm_eps=1e-5, max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0)
torch.manual_seed(100)
model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
g = torch.Generator().manual_seed(200)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norm" in name:
            p.copy_(1 + 0.2 * (2 * torch.rand(p.shape, generator=g) - 1))
        elif name.endswith("mlp.gate.weight"):
            p.copy_(0.4 * torch.randn(p.shape, generator=g))  # decisive routing
        else:
            p.copy_(0.08 * torch.randn(p.shape, generator=g))
        if "q_proj" in name or "k_proj" in name:
            p.mul_(4.0)
model.save_pretrained(out, safe_serialization=True)
for f in os.listdir(out):
    if f not in ("config.json", "model.safetensors"):
        os.remove(os.path.join(out, f))
