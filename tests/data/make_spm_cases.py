#!/usr/bin/env python3
"""Writes the SentencePiece (llama-style) references rlx's tokenizer must
reproduce: a small BPE model with byte fallback trained here by the
`sentencepiece` package, stored as GGUF tokenizer metadata the way llama.cpp
stores a llama vocabulary (tokenizer.ggml.model = "llama": tokens, scores,
token types), in tests/data/spm_vocab.gguf; and tests/data/spm_cases.json:
the ids sentencepiece gives for a corpus, and its decoding of them.

    pip install gguf numpy sentencepiece
    python3 tests/data/make_spm_cases.py
"""
import io
import json
import pathlib

import gguf
import sentencepiece as spm

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT_GGUF = ROOT / "tests" / "data" / "spm_vocab.gguf"
OUT_CASES = ROOT / "tests" / "data" / "spm_cases.json"

TRAIN = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! It's a test: we're here, they've gone.",
    "Numbers 3.14159 and 1,000,000 on 2024-11-30.",
    "Café naïve résumé façade Ångström",
    "def f(x):\n    return x**2",
    "the theory of the thing is that there are three of them",
    "generation of text with a language model, one token at a time",
] * 20

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! It's a test.",
    "unseen characters: 我爱北京 🍕 Ελληνικά",
    "  two leading spaces and   runs   of spaces ",
    "tabs\there\nnew lines\n",
    "3.14159 1,000,000",
    "x",
    "",
    "thethethe theory thermometer",
]

model = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(TRAIN), model_writer=model, model_type="bpe", vocab_size=420,
    byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
    add_dummy_prefix=True, character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0, pad_id=-1)
sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

tokens, scores, types = [], [], []
for i in range(sp.get_piece_size()):
    tokens.append(sp.id_to_piece(i))
    scores.append(sp.get_score(i))
    if sp.is_unknown(i):
        types.append(2)
    elif sp.is_control(i):
        types.append(3)
    elif sp.is_byte(i):
        types.append(6)
    else:
        types.append(1)

w = gguf.GGUFWriter(str(OUT_GGUF), "llama")
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.add_add_bos_token(True)
w.add_add_space_prefix(True)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

cases = []
for text in CORPUS:
    ids = sp.encode(text)
    cases.append({"text": text, "ids": ids, "decoded": sp.decode(ids)})
OUT_CASES.write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
print(f"wrote {OUT_GGUF} ({OUT_GGUF.stat().st_size} bytes) and {OUT_CASES}")
for c in cases:
    print(c["ids"][:20], [sp.id_to_piece(i) for i in c["ids"][:12]])
