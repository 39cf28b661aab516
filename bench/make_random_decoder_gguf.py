#!/usr/bin/env python3
"""Writes a GGUF decoder with random f16 weights and a real vocabulary, so
that rlx and llama.cpp can be run on the same file. Keys and tensor names
are llama.cpp's for each architecture (--arch):

  llama   TinyLlama-1.1B's shapes (the default)
  qwen3   Qwen3-1.7B's shapes: per-head q/k RMSNorm (attn_q_norm,
          attn_k_norm), rope base 1e6, tied embeddings
  gemma2  Gemma-2-2B's shapes with the FFN halved (about 1.2B parameters):
          head_dim 256, post-attention and post-FFN norms, sliding window
          4096 on every other layer, logit soft caps 50 / 30, tied
          embeddings. GGUF has no query_pre_attn_scalar: llama.cpp (and rlx)
          scale queries by 1/sqrt(head_dim), i.e. 256 here.

The size flags override the architecture's defaults. The vocabulary
(SentencePiece, 32000 tokens) is copied from llama.cpp's
models/ggml-vocab-llama-spm.gguf for every architecture: with random weights
the tokens mean nothing, and both engines run on token ids. Weights are
N(0, 0.02) in f16, norms 1 (f32). Seeded: the same flags give the same bytes.
Uses gguf-py as llama.cpp ships it (pass its directory with --gguf-py) and
numpy.

  python3 bench/make_random_decoder_gguf.py out.gguf --arch qwen3 \\
      --vocab-file models/ggml-vocab/ggml-vocab-llama-spm.gguf --gguf-py /path/to/llama.cpp/gguf-py
"""
import argparse
import sys

import numpy as np

# Per architecture: hidden, layers, heads, kv heads, head_dim (None: hidden /
# heads), FFN width, context length, rope base, RMSNorm epsilon.
DEFAULTS = {
    "llama": dict(hidden=2048, layers=22, heads=32, kv_heads=4, head_dim=None, ffn=5632, ctx=32768,
                  rope_base=10000.0, eps=1e-5),
    "qwen3": dict(hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=6144, ctx=40960,
                  rope_base=1e6, eps=1e-6),
    "gemma2": dict(hidden=2304, layers=26, heads=8, kv_heads=4, head_dim=256, ffn=4608, ctx=8192,
                   rope_base=10000.0, eps=1e-6),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--arch", choices=sorted(DEFAULTS), default="llama")
    ap.add_argument("--vocab-file", required=True)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    for flag in ("hidden", "layers", "heads", "kv-heads", "head-dim", "ffn", "ctx"):
        ap.add_argument("--" + flag, type=int, help="default: the architecture's")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for key, value in DEFAULTS[a.arch].items():
        if getattr(a, key, None) is None:
            setattr(a, key, value)
    if a.head_dim is None:
        a.head_dim = a.hidden // a.heads
    return a


def write(a):
    sys.path.insert(0, a.gguf_py)
    import gguf

    vocab = gguf.GGUFReader(a.vocab_file)
    tokens = vocab.fields["tokenizer.ggml.tokens"].contents()
    scores = vocab.fields["tokenizer.ggml.scores"].contents()
    types = vocab.fields["tokenizer.ggml.token_type"].contents()
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, a.arch)
    w.add_name("random-tinyllama" if a.arch == "llama" else "random-" + a.arch)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    if a.arch == "llama":
        w.add_rope_dimension_count(a.head_dim)
        w.add_rope_freq_base(a.rope_base)
    else:
        w.add_key_length(a.head_dim)
        w.add_value_length(a.head_dim)
    if a.arch == "qwen3":
        w.add_rope_freq_base(a.rope_base)
    w.add_layer_norm_rms_eps(a.eps)
    if a.arch == "gemma2":  # as llama.cpp's converter writes Gemma 2
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
        w.add_sliding_window(4096)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    for key, add in (("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
                     ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
                     ("tokenizer.ggml.unknown_token_id", w.add_unk_token_id)):
        if key in vocab.fields:
            add(int(vocab.fields[key].contents()))

    rng = np.random.default_rng(a.seed)
    n_params = 0

    def rand(*shape):  # numpy shape: [rows, cols] = GGUF [cols, rows]
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    def add(name, t):
        nonlocal n_params
        n_params += t.size
        w.add_tensor(name, t)

    def norm(n):
        return np.ones(n, np.float32)

    q_dim = a.heads * a.head_dim
    kv_dim = a.kv_heads * a.head_dim
    add("token_embd.weight", rand(n_vocab, a.hidden))
    for i in range(a.layers):
        p = f"blk.{i}."
        add(p + "attn_norm.weight", norm(a.hidden))
        add(p + "attn_q.weight", rand(q_dim, a.hidden))
        add(p + "attn_k.weight", rand(kv_dim, a.hidden))
        add(p + "attn_v.weight", rand(kv_dim, a.hidden))
        add(p + "attn_output.weight", rand(a.hidden, q_dim))
        if a.arch == "qwen3":
            add(p + "attn_q_norm.weight", norm(a.head_dim))
            add(p + "attn_k_norm.weight", norm(a.head_dim))
        if a.arch == "gemma2":
            add(p + "post_attention_norm.weight", norm(a.hidden))
        add(p + "ffn_norm.weight", norm(a.hidden))
        add(p + "ffn_gate.weight", rand(a.ffn, a.hidden))
        add(p + "ffn_up.weight", rand(a.ffn, a.hidden))
        add(p + "ffn_down.weight", rand(a.hidden, a.ffn))
        if a.arch == "gemma2":
            add(p + "post_ffw_norm.weight", norm(a.hidden))
    add("output_norm.weight", norm(a.hidden))
    if a.arch == "llama":  # Qwen3 and Gemma 2 tie the LM head to token_embd
        add("output.weight", rand(n_vocab, a.hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {a.arch}, {a.layers} layers, hidden {a.hidden}, heads {a.heads}/{a.kv_heads} x {a.head_dim}, "
          f"FFN {a.ffn}, vocab {n_vocab}, {n_params / 1e9:.2f}B parameters")


def main(argv=None):
    write(parse_args(argv))


if __name__ == "__main__":
    main()
