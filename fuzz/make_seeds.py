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


def main():
    model, out = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    gguf_seeds(os.path.join(here, "..", "tests", "data"), out)
    safetensors_seeds(model, out)
    config_seeds(model, out)
    tokenizer_seeds(model, out)
    text_seeds(os.path.join(here, "..", "tests", "data", "tokenizer_cases.json"), out)


if __name__ == "__main__":
    main()
