#!/usr/bin/env python3
"""Writes tests/data/minilm_reference.json: sentence-transformers embeddings
of a varied set of sentences with the default model (all-MiniLM-L6-v2, read
from models/ as scripts/setup fetches it). rlx's CPU embeddings must match
them to cosine similarity >= 0.9999.

    pip install sentence-transformers
    python3 tests/data/make_minilm_reference.py
"""
import json
import pathlib

import torch
from sentence_transformers import SentenceTransformer

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "all-MiniLM-L6-v2"
OUT = ROOT / "tests" / "data" / "minilm_reference.json"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on stage.",
    "hello",
    "",
    "Café naïve résumé: accents are stripped before lookup.",
    "我爱北京天安门",
    "Machine learning compilers fuse operators to reduce memory traffic and kernel launches.",
    "What is the capital of France? Paris!!! (obviously)",
    "Emoji 😀 and symbols $100 + 5% = ??",
    "Съешь же ещё этих мягких французских булок",
    "numbers 3.14159 and dates 2024-11-30 in a sentence",
    " ".join(["This long sentence repeats to exceed one hundred and twenty eight tokens."] * 12),
]


def main():
    torch.manual_seed(0)
    model = SentenceTransformer(str(MODEL), device="cpu")
    emb = model.encode(SENTENCES, batch_size=4, convert_to_numpy=True, normalize_embeddings=False)
    out = {
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": model.max_seq_length,
        "source": "sentence_transformers.SentenceTransformer(...).encode, float32, cpu",
        "cases": [{"text": s, "embedding": [float(x) for x in e]} for s, e in zip(SENTENCES, emb)],
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"wrote {len(SENTENCES)} embeddings of dim {emb.shape[1]} to {OUT}")


if __name__ == "__main__":
    main()
