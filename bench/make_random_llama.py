#!/usr/bin/env python3
"""Writes a Hugging Face LlamaForCausalLM directory with random f16 weights:
config.json + model.safetensors, no tokenizer (drive it with token ids:
`rlx generate --prompt-ids ...`). Defaults are TinyLlama-1.1B's shapes.
Needs numpy and safetensors only (no network; both come with a torch +
transformers install), so it runs on the GPU machine and on the CPU.

  python3 bench/make_random_llama.py /tmp/tinyllama-random
  python3 bench/make_random_llama.py /tmp/tiny --hidden 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --vocab 97
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="directory to write")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--max-positions", type=int, default=2048)
    ap.add_argument("--tie", action="store_true", help="tie the LM head to the embedding")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    assert a.hidden % a.heads == 0 and a.heads % a.kv_heads == 0, "hidden/heads/kv-heads do not divide"
    head_dim = a.hidden // a.heads
    rng = np.random.default_rng(a.seed)

    # Small weights keep the activations of a deep random stack finite in f16.
    def w(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16)

    def ones(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float16)

    t = {"model.embed_tokens.weight": w(a.vocab, a.hidden, std=1.0), "model.norm.weight": ones(a.hidden)}
    if not a.tie:
        t["lm_head.weight"] = w(a.vocab, a.hidden)
    for l in range(a.layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = ones(a.hidden)
        t[p + "post_attention_layernorm.weight"] = ones(a.hidden)
        t[p + "self_attn.q_proj.weight"] = w(a.heads * head_dim, a.hidden)
        t[p + "self_attn.k_proj.weight"] = w(a.kv_heads * head_dim, a.hidden)
        t[p + "self_attn.v_proj.weight"] = w(a.kv_heads * head_dim, a.hidden)
        t[p + "self_attn.o_proj.weight"] = w(a.hidden, a.heads * head_dim)
        t[p + "mlp.gate_proj.weight"] = w(a.ffn, a.hidden)
        t[p + "mlp.up_proj.weight"] = w(a.ffn, a.hidden)
        t[p + "mlp.down_proj.weight"] = w(a.hidden, a.ffn)

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": a.hidden,
        "intermediate_size": a.ffn,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "vocab_size": a.vocab,
        "rope_theta": a.rope_theta,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": a.max_positions,
        "tie_word_embeddings": a.tie,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float16",
        "attention_bias": False,
        "mlp_bias": False,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(t, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    n = sum(v.size for v in t.values())
    print(f"wrote {a.out}: {n / 1e6:.1f}M params, {n * 2 / 2**30:.2f} GiB f16")


if __name__ == "__main__":
    main()
