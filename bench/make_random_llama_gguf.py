#!/usr/bin/env python3
"""Writes a GGUF LLaMA model with random f16 weights and a real vocabulary,
so that rlx and llama.cpp can be run on the same file: TinyLlama-1.1B's
shapes by default, the tokenizer (SentencePiece, 32000 tokens) copied from
llama.cpp's models/ggml-vocab-llama-spm.gguf. Uses gguf-py as llama.cpp
ships it (pass its directory with --gguf-py) and numpy.

  python3 bench/make_random_llama_gguf.py out.gguf --vocab-file models/ggml-vocab/ggml-vocab-llama-spm.gguf \
      --gguf-py /path/to/llama.cpp/gguf-py
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--vocab-file", required=True)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=5632)
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf

    vocab = gguf.GGUFReader(a.vocab_file)
    tokens = vocab.fields["tokenizer.ggml.tokens"].contents()
    scores = vocab.fields["tokenizer.ggml.scores"].contents()
    types = vocab.fields["tokenizer.ggml.token_type"].contents()
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("random-tinyllama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(a.hidden // a.heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
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

    def rand(*shape):  # numpy shape: [rows, cols] = GGUF [cols, rows]
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    kv_dim = a.hidden // a.heads * a.kv_heads
    w.add_tensor("token_embd.weight", rand(n_vocab, a.hidden))
    for i in range(a.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(a.hidden, np.float32))
        w.add_tensor(p + "attn_q.weight", rand(a.hidden, a.hidden))
        w.add_tensor(p + "attn_k.weight", rand(kv_dim, a.hidden))
        w.add_tensor(p + "attn_v.weight", rand(kv_dim, a.hidden))
        w.add_tensor(p + "attn_output.weight", rand(a.hidden, a.hidden))
        w.add_tensor(p + "ffn_norm.weight", np.ones(a.hidden, np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(a.ffn, a.hidden))
        w.add_tensor(p + "ffn_up.weight", rand(a.ffn, a.hidden))
        w.add_tensor(p + "ffn_down.weight", rand(a.hidden, a.ffn))
    w.add_tensor("output_norm.weight", np.ones(a.hidden, np.float32))
    w.add_tensor("output.weight", rand(n_vocab, a.hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {a.layers} layers, hidden {a.hidden}, vocab {n_vocab}")


if __name__ == "__main__":
    main()
