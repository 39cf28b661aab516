#!/usr/bin/env python3
"""Seed corpora for the fuzzers, cut from the real model files.

usage: make_seeds.py MODEL_DIR OUT_DIR
Writes OUT_DIR/<fuzzer>/seed-N: small, valid inputs that the fuzzers mutate.
The model's own files are too large to fuzz quickly (a 90 MB safetensors,
a 700 KB tokenizer.json), so the seeds keep their structure at a small size.
"""
import json
import os
import struct
import sys


def write(out, fuzzer, name, data):
    d = os.path.join(out, fuzzer)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors_seeds(model, out):
    path = os.path.join(model, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data_start = 8 + n
        # The smallest real tensors, with their real bytes, re-packed.
        small = sorted((k for k in header if k != "__metadata__"),
                       key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])[:3]
        new_header, body = {}, b""
        for k in small:
            b, e = header[k]["data_offsets"]
            f.seek(data_start + b)
            chunk = f.read(e - b)
            new_header[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"],
                             "data_offsets": [len(body), len(body) + len(chunk)]}
            body += chunk
    if "__metadata__" in header:
        new_header["__metadata__"] = header["__metadata__"]
    h = json.dumps(new_header).encode()
    write(out, "safetensors_fuzzer", "seed-real", struct.pack("<Q", len(h)) + h + body)
    for dt, size in (("F16", 2), ("BF16", 2), ("I64", 8)):
        h = json.dumps({"t": {"dtype": dt, "shape": [2, 2], "data_offsets": [0, 4 * size]}}).encode()
        write(out, "safetensors_fuzzer", "seed-" + dt, struct.pack("<Q", len(h)) + h + bytes(range(4 * size)))


def read(model, name):
    with open(os.path.join(model, name), "rb") as f:
        return f.read()


def config_seeds(model, out):
    # The first byte picks the file (config_fuzzer.cc).
    for i, name in enumerate(("config.json", "modules.json", "1_Pooling/config.json",
                              "sentence_bert_config.json")):
        if os.path.exists(os.path.join(model, name)):
            write(out, "config_fuzzer", "seed-%d" % i, bytes([i]) + read(model, name))


def tokenizer_seeds(model, out):
    tok = json.loads(read(model, "tokenizer.json"))
    vocab = tok["model"]["vocab"]
    keep = sorted(vocab.items(), key=lambda kv: kv[1])[:120]
    for word in ("hello", "world", "##s", "token", "##ize", "the", ",", "!"):
        if word in vocab:
            keep.append((word, vocab[word]))
    tok["model"]["vocab"] = dict(keep)
    small = json.dumps(tok).encode()
    write(out, "tokenizer_load_fuzzer", "seed-json", b"\0" + small)
    vocab_txt = read(model, "vocab.txt").split(b"\n")[:200]
    write(out, "tokenizer_load_fuzzer", "seed-vocab", b"\1" + b"\n".join(vocab_txt))


def text_seeds(cases, out):
    with open(cases, encoding="utf-8") as f:
        for i, c in enumerate(json.load(f)["cases"]):
            write(out, "tokenize_fuzzer", "seed-%d" % i, bytes([c["max_length"] % 64]) + c["text"].encode())
    write(out, "tokenize_fuzzer", "seed-specials", b"\x10" + b"[CLS][SEP]x[MASK[MASK] [PAD][UNK]" * 4)


def gguf_seeds(data_dir, out):
    # The committed test GGUFs: every quantized type, a llama, a vocabulary.
    for name in ("gguf_cases.gguf", "tiny_llama.gguf", "spm_vocab.gguf"):
        with open(os.path.join(data_dir, name), "rb") as f:
            write(out, "gguf_fuzzer", "seed-" + name, f.read())


def gguf_bytes(kv, tensors):
    """A GGUF v3 file: kv is [(key, type, payload bytes)], tensors
    [(name, ne (ggml order), f32 values)], laid out as the format's writer does."""
    def text(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, typ, payload in kv:
        out += text(key) + struct.pack("<I", typ) + payload
    data, infos = b"", b""
    for name, ne, values in tensors:
        while len(data) % 32:
            data += b"\0"
        infos += text(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", 0, len(data))
        data += struct.pack("<%df" % len(values), *values)
    out += infos
    while len(out) % 32:
        out += b"\0"
    return out + data


def decoder_tokenizer_seeds(data_dir, out):
    """The decoder embedders' byte-level BPE tokenizer.json files (Qwen's NFC
    normalizer, a TemplateProcessing and a Sequence post_processor)."""
    for name in ("qwen3_embed", "qwen2_embed"):
        write(out, "tokenizer_load_fuzzer", "seed-bpe-" + name, b"\2" + read(os.path.join(data_dir, name),
                                                                               "tokenizer.json"))


def encoder_config_seeds(data_dir, out):
    """The config.json of every committed encoder fixture (ModernBERT,
    NomicBERT, XLM-R ...), so that mutations reach each family's reader."""
    for root, _, files in sorted(os.walk(data_dir)):
        if "config.json" in files and os.path.getsize(os.path.join(root, "config.json")) < 8192:
            name = os.path.relpath(root, data_dir).replace(os.sep, "-")
            write(out, "config_fuzzer", "seed-" + name, b"\0" + read(root, "config.json"))


def small_llama_seeds(out):
    """One-layer LLaMA GGUFs of a few KB with a BPE and an SPM vocabulary, so
    that mutations reach the LLaMA metadata reader and the tokenizer loaders
    (the committed tiny_llama.gguf is past the fuzzers' -max_len)."""
    def u32(v):
        return struct.pack("<I", v)

    def f32(v):
        return struct.pack("<f", v)

    def s(v):
        b = v.encode()
        return struct.pack("<Q", len(b)) + b

    def arr(typ, items):
        return struct.pack("<IQ", typ, len(items)) + b"".join(items)

    # GPT-2's byte symbols, then a few merged tokens.
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_tokens = [chr(c) for _, c in sorted(zip(bs, cs))]
    vocab = byte_tokens + ["he", "ll", "hell", "hello", "\u0120w", "\u0120wor"]
    merges = ["h e", "l l", "he ll", "hell o", "\u0120 w", "\u0120w or"]
    H, F, V = 8, 12, len(vocab)
    def meta(extra):
        return [("general.architecture", 8, s("llama")), ("llama.context_length", 4, u32(32)),
                ("llama.embedding_length", 4, u32(H)), ("llama.feed_forward_length", 4, u32(F)),
                ("llama.block_count", 4, u32(1)), ("llama.attention.head_count", 4, u32(2)),
                ("llama.attention.head_count_kv", 4, u32(1)),
                ("llama.attention.layer_norm_rms_epsilon", 6, f32(1e-5)),
                ("llama.rope.freq_base", 6, f32(10000.0))] + extra
    def ramp(count):
        return [((i * 37) % 17 - 8) / 16.0 for i in range(count)]
    tensors = [("token_embd.weight", [H, V], ramp(H * V)), ("output_norm.weight", [H], [1.0] * H),
               ("blk.0.attn_norm.weight", [H], [1.0] * H), ("blk.0.ffn_norm.weight", [H], [1.0] * H),
               ("blk.0.attn_q.weight", [H, H], ramp(H * H)), ("blk.0.attn_k.weight", [H, H // 2], ramp(H * H // 2)),
               ("blk.0.attn_v.weight", [H, H // 2], ramp(H * H // 2)),
               ("blk.0.attn_output.weight", [H, H], ramp(H * H)), ("blk.0.ffn_gate.weight", [H, F], ramp(H * F)),
               ("blk.0.ffn_up.weight", [H, F], ramp(H * F)), ("blk.0.ffn_down.weight", [F, H], ramp(H * F))]
    bpe = [("tokenizer.ggml.model", 8, s("gpt2")), ("tokenizer.ggml.pre", 8, s("qwen2")),
           ("tokenizer.ggml.tokens", 9, arr(8, [s(t) for t in vocab])),
           ("tokenizer.ggml.merges", 9, arr(8, [s(m) for m in merges])),
           ("tokenizer.ggml.eos_token_id", 4, u32(V - 1))]
    write(out, "gguf_fuzzer", "seed-llama-bpe", gguf_bytes(meta(bpe), tensors))
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581he", "llo", "\u2581w"]
    types = [2, 3, 3] + [6] * 256 + [1, 1, 1]
    spm = [("tokenizer.ggml.model", 8, s("llama")), ("tokenizer.ggml.tokens", 9, arr(8, [s(p) for p in pieces])),
           ("tokenizer.ggml.scores", 9, arr(6, [f32(-float(i)) for i in range(len(pieces))])),
           ("tokenizer.ggml.token_type", 9, arr(5, [struct.pack("<i", t) for t in types])),
           ("tokenizer.ggml.bos_token_id", 4, u32(1)), ("tokenizer.ggml.eos_token_id", 4, u32(2))]
    spm_tensors = [(n, ne if n != "token_embd.weight" else [H, len(pieces)],
                    v if n != "token_embd.weight" else ramp(H * len(pieces))) for n, ne, v in tensors]
    write(out, "gguf_fuzzer", "seed-llama-spm", gguf_bytes(meta(spm), spm_tensors))


def small_bert_seed(out):
    """One-layer BERT and NomicBERT GGUFs of a few KB as llama.cpp's converter lays them out
    (bert.* keys, phantom-space WordPiece vocabulary, llama.cpp's tensor
    names), so that mutations reach the encoder's GGUF reader; the committed
    tests/data/bert_gguf files are past the fuzzers' -max_len."""
    def u32(v):
        return struct.pack("<I", v)

    def s(v):
        b = v.encode()
        return struct.pack("<Q", len(b)) + b

    def arr(typ, items):
        return struct.pack("<IQ", typ, len(items)) + b"".join(items)

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\u2581hello", "\u2581a", "\u2581b", "llo", "\u2581!"]
    types = [3, 3, 3, 3, 3, 1, 1, 1, 1, 1]
    H, F, V, P = 8, 12, len(tokens), 16
    def ramp(count):
        return [((i * 37) % 17 - 8) / 16.0 for i in range(count)]
    kv = [("general.architecture", 8, s("bert")), ("bert.context_length", 4, u32(P)),
          ("bert.embedding_length", 4, u32(H)), ("bert.feed_forward_length", 4, u32(F)),
          ("bert.block_count", 4, u32(1)), ("bert.attention.head_count", 4, u32(2)),
          ("bert.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-12)), ("bert.pooling_type", 4, u32(1)),
          ("tokenizer.ggml.model", 8, s("bert")), ("tokenizer.ggml.tokens", 9, arr(8, [s(t) for t in tokens])),
          ("tokenizer.ggml.token_type", 9, arr(5, [struct.pack("<i", t) for t in types])),
          ("tokenizer.ggml.unknown_token_id", 4, u32(1)), ("tokenizer.ggml.seperator_token_id", 4, u32(3)),
          ("tokenizer.ggml.padding_token_id", 4, u32(0))]
    tensors = [("token_embd.weight", [H, V], ramp(H * V)), ("position_embd.weight", [H, P], ramp(H * P)),
               ("token_types.weight", [H, 2], ramp(H * 2)), ("token_embd_norm.weight", [H], [1.0] * H),
               ("token_embd_norm.bias", [H], [0.0] * H)]
    for name, ne in (("attn_q", [H, H]), ("attn_k", [H, H]), ("attn_v", [H, H]), ("attn_output", [H, H]),
                     ("ffn_up", [H, F]), ("ffn_down", [F, H])):
        tensors += [("blk.0.%s.weight" % name, ne, ramp(ne[0] * ne[1])), ("blk.0.%s.bias" % name, [ne[1]], ramp(ne[1]))]
    for name in ("attn_output_norm", "layer_output_norm"):
        tensors += [("blk.0.%s.weight" % name, [H], [1.0] * H), ("blk.0.%s.bias" % name, [H], [0.0] * H)]
    write(out, "gguf_fuzzer", "seed-bert", gguf_bytes(kv, tensors))
    # NomicBERT: the same keys under nomic-bert.*, rotary positions (no
    # position table), a fused attn_qkv and a gated MLP, no biases.
    nkv = [(k.replace("bert.", "nomic-bert.", 1) if k.startswith("bert.") else k, t, v) for k, t, v in kv]
    nkv[0] = ("general.architecture", 8, s("nomic-bert"))
    nkv.append(("nomic-bert.rope.freq_base", 6, struct.pack("<f", 1000.0)))
    ntensors = [t for t in tensors[:5] if t[0] != "position_embd.weight"]
    for name, ne in (("attn_qkv", [H, 3 * H]), ("attn_output", [H, H]), ("ffn_up", [H, F]), ("ffn_gate", [H, F]),
                     ("ffn_down", [F, H])):
        ntensors.append(("blk.0.%s.weight" % name, ne, ramp(ne[0] * ne[1])))
    ntensors += [t for t in tensors if "_norm." in t[0] and t[0].startswith("blk.")]
    write(out, "gguf_fuzzer", "seed-nomic-bert", gguf_bytes(nkv, ntensors))


def llama_config_seeds(out):
    """config.json of each decoder family rlx reads, with the fields it checks."""
    base = {"vocab_size": 640, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "max_position_embeddings": 128, "tie_word_embeddings": True}
    families = {
        "llama3": {"model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                           "high_freq_factor": 4.0,
                                                           "original_max_position_embeddings": 64}},
        "linear": {"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2.0}},
        "mistral": {"model_type": "mistral", "sliding_window": 48},
        "qwen2": {"model_type": "qwen2", "use_sliding_window": False, "sliding_window": 32},
        "qwen3": {"model_type": "qwen3", "head_dim": 24},
        "phi3": {"model_type": "phi3", "partial_rotary_factor": 1.0},
    }
    for name, extra in families.items():
        write(out, "llama_config_fuzzer", "seed-" + name, json.dumps(dict(base, **extra)))


def main():
    model, out = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    gguf_seeds(os.path.join(here, "..", "tests", "data"), out)
    small_llama_seeds(out)
    small_bert_seed(out)
    llama_config_seeds(out)
    safetensors_seeds(model, out)
    config_seeds(model, out)
    encoder_config_seeds(os.path.join(here, "..", "tests", "data"), out)
    decoder_tokenizer_seeds(os.path.join(here, "..", "tests", "data"), out)
    tokenizer_seeds(model, out)
    text_seeds(os.path.join(here, "..", "tests", "data", "tokenizer_cases.json"), out)


if __name__ == "__main__":
    main()
