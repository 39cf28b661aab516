#!/usr/bin/env python3
"""Writes tests/data/bert_gguf/: a random BertModel of odd sizes as a
sentence-transformers folder, the same model as GGUF files written by
llama.cpp's converter, and what sentence-transformers computes with it.

  st/              BertModel (hidden 48, 3 heads, 2 layers, intermediate 100,
                   64 positions, 2 token types, layer_norm_eps 1e-5) with
                   mean Pooling and Normalize; a WordPiece vocabulary
                   trained here (lowercasing, accents stripped).
  bert-f32.gguf    llama.cpp's convert_hf_to_gguf.py --outtype f32 of st/
  bert-f16.gguf    the same with --outtype f16 (matrices f16, norms and
                   biases f32, as the converter writes them)
  reference.json   per text: the Hugging Face tokenizer's ids and
                   SentenceTransformer.encode's vector.

The converter recognises a BERT vocabulary by hashing how it tokenizes a
fixed text, which it knows only for published vocabularies; for the small
vocabulary trained here its answer (the tokenizer.ggml.pre name, which
WordPiece does not use) is given as "bert-bge", what it writes for
bge-small-en-v1.5 and all-MiniLM-L6-v2. Nothing else of the converter is
changed.

    python3 tests/data/make_bert_gguf_case.py --out tests/data/bert_gguf \
        --llama-cpp /path/to/llama.cpp   # holds convert_hf_to_gguf.py, conversion/ and gguf-py/
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "The quick brown fox jumps over the lazy dog.",
    "naive cafe resume", "1234 5678 90", "What is the capital of France?", "Paris is the capital of France.",
    "Embeddings map sentences to vectors; similar sentences get similar vectors.",
]
TEXTS = [
    "hello",
    "",
    "A man is eating food.",
    "The Stock Market fell SHARPLY today, and the cats slept through all of it.",
    "Naïve café résumé: accents are stripped, CASE is folded.",
    "unknownwordzzz and 中文 characters, plus [MASK] written in the text!",
    "Quantum entanglement links particles across space. What is the capital of France? Paris is. " * 4,
]
MAX_LEN = 64

CONVERT = r"""
import runpy, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/gguf-py"]
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "bert-bge"
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def tokenizer(path):
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast
    tok = BertWordPieceTokenizer(lowercase=True, strip_accents=True)
    tok.train_from_iterator(CORPUS * 4, vocab_size=170, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    fast = BertTokenizerFast(tokenizer_object=tok._tokenizer, do_lower_case=True, unk_token="[UNK]",
                             cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                             model_max_length=MAX_LEN)
    fast.save_pretrained(path)
    return fast


def randomize(model, seed):
    # transformers' init (std 0.02) makes every output nearly the same; wider
    # weights and non-trivial norms make a wrong graph visible.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--llama-cpp", required=True)
    a = ap.parse_args()
    import sentence_transformers
    import transformers as T
    from sentence_transformers import SentenceTransformer, models
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    ref = {"versions": {"torch": torch.__version__, "transformers": T.__version__,
                        "sentence_transformers": sentence_transformers.__version__}}
    print(ref["versions"])

    raw = os.path.join(a.out, "raw")
    tok = tokenizer(raw)
    c = T.BertConfig(vocab_size=len(tok), hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                     intermediate_size=100, max_position_embeddings=MAX_LEN, type_vocab_size=2,
                     layer_norm_eps=1e-5, hidden_act="gelu", pad_token_id=tok.pad_token_id)
    torch.manual_seed(1)
    m = T.BertModel(c, add_pooling_layer=False).eval()
    randomize(m, 1)
    m.save_pretrained(raw, safe_serialization=True)
    word = models.Transformer(raw, max_seq_length=MAX_LEN)
    st = SentenceTransformer(modules=[word, models.Pooling(48, pooling_mode="mean"), models.Normalize()],
                             device="cpu")
    st_dir = os.path.join(a.out, "st")
    st.save(st_dir)
    shutil.rmtree(raw)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(st_dir, extra)):
            os.remove(os.path.join(st_dir, extra))

    for outtype in ("f32", "f16"):
        out = os.path.join(a.out, f"bert-{outtype}.gguf")
        subprocess.run([sys.executable, "-c", CONVERT, a.llama_cpp, st_dir, "--outtype", outtype,
                        "--outfile", out], check=True)

    st = SentenceTransformer(st_dir, device="cpu")
    got = st.encode(TEXTS, batch_size=3, convert_to_numpy=True)
    cases = []
    for t, e in zip(TEXTS, got):
        ids = tok(t, truncation=True, max_length=MAX_LEN)["input_ids"]
        cases.append({"text": t, "ids": ids, "embedding": [float(f"{x:.8g}") for x in e]})
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        f.write('{"versions": %s,\n "texts": [\n  ' % json.dumps(ref["versions"]))
        f.write(",\n  ".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n ]}\n")
    for root, _, files in os.walk(a.out):
        for n in files:
            print(os.path.relpath(os.path.join(root, n), a.out), os.path.getsize(os.path.join(root, n)))


if __name__ == "__main__":
    main()
