#!/usr/bin/env python3
"""Writes the byte-level BPE references rlx's tokenizer must reproduce:

- tests/data/bpe_cases.json: ids of a varied corpus for
  * "smollm2": the SmolLM2-135M-Instruct tokenizer, built with Hugging Face's
    `tokenizers` from the default model's GGUF (smollm2_hf_tokenizer.py), and
  * "trained": a small byte-level BPE trained here on the corpus below,
    saved as tests/data/bpe_trained_tokenizer.json;
  * "llama3": the same with Llama 3's pre-tokenizer (a Split on its regex,
    ByteLevel without its own regex, ignore_merges), saved as
    tests/data/bpe_llama3_tokenizer.json;
- each case also has the text `tokenizers` decodes the ids back to.

    pip install gguf numpy tokenizers
    python3 tests/data/make_bpe_cases.py
"""
import json
import pathlib

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from smollm2_hf_tokenizer import smollm2_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "bpe_cases.json"
TRAINED = ROOT / "tests" / "data" / "bpe_trained_tokenizer.json"
LLAMA3 = ROOT / "tests" / "data" / "bpe_llama3_tokenizer.json"
# Llama 3's pre-tokenizer pattern, as its tokenizer.json writes it.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! It's a test: we're here, they've gone, I'm fine, you'll see, he'd know.",
    "DON'T SHOUT'S 'quoted' ''s",
    "Numbers 3.14159 and 1,000,000 on 2024-11-30 at 12:30pm; 0x1F, 1e-9, ½ ⅓ ² ٣",
    "tabs\there\nnew\r\nlines   many    spaces \u00a0nbsp\u2003em\u3000ideographic\n\n\n",
    "  leading spaces and trailing   ",
    "Café naïve résumé façade Ångström Ελληνικά русский",
    "我爱北京天安门 東京は日本の首都です。 안녕하세요",
    "emoji 🍕🍕 😀 👍🏽 👨‍👩‍👧 zero\u200bwidth",
    "def f(x):\n    return x**2  # square\n\nprint(f(3))",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more<|im_end|><|im_end|>",
    "a<|sep|>b <|sep|> c",
    "supercalifragilisticexpialidocious" * 4,
    "",
    " ",
    "\n",
    "!!!???...,,,;;;",
    "x" * 300,
    "I'M SURE it'S fine 12345678 ab12cd\t\tx  \n\n  y\r\n z (paren) !?x \u00a0\nq",
]


def trained_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|sep|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    tok.save(str(TRAINED))
    return tok


def llama3_tokenizer():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<|begin_of_text|>", "<|sep|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    tok.save(str(LLAMA3))
    return tok


cases = {"smollm2": [], "trained": [], "llama3": []}
for name, tok in [("smollm2", smollm2_tokenizer()), ("trained", trained_tokenizer()),
                  ("llama3", llama3_tokenizer())]:
    for text in CORPUS:
        ids = tok.encode(text).ids
        cases[name].append({"text": text, "ids": ids,
                            "decoded": tok.decode(ids, skip_special_tokens=False)})
OUT.write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
print(f"wrote {OUT} and {TRAINED}")
