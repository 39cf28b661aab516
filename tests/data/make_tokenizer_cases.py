#!/usr/bin/env python3
"""Writes tests/data/tokenizer_cases.json: token ids that Hugging Face's
`tokenizers` package gives for a varied corpus, using the default model's
tokenizer.json. rlx's WordPiece must reproduce them exactly.

    pip install tokenizers
    python3 tests/data/make_tokenizer_cases.py
"""
import json
import pathlib

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
OUT = ROOT / "tests" / "data" / "tokenizer_cases.json"

long_word = "supercalifragilistic" * 6  # 120 chars: over max_input_chars_per_word
long_text = " ".join(f"word{i} is, number {i}!" for i in range(150))  # > 600 tokens

CASES = [
    ("plain", "The quick brown fox jumps over the lazy dog.", 512),
    ("mixed case", "HeLLo WoRLD, ThIs Is MiXeD CaSe", 512),
    ("accents", "Café naïve résumé façade Ångström", 512),
    ("punctuation", "Hello, world!!! (ok?) [yes] {no} <maybe> a-b_c/d\\e", 512),
    ("ascii symbols", "$100 + 5% = ^caret^ `tick` ~tilde~ |pipe| @at #hash &amp;", 512),
    ("unicode punctuation", "“Quoted” ‘single’ — dash – en … ellipsis «guillemets» ¿qué? ¡sí!", 512),
    ("cjk", "我爱北京天安门", 512),
    ("japanese", "東京は日本の首都です。ひらがなとカタカナ", 512),
    ("korean", "안녕하세요 세계", 512),
    ("emoji", "I love pizza 🍕🍕 and 😀 smiles 👍🏽 family 👨‍👩‍👧", 512),
    ("url", "See https://example.com/path?query=1&x=y#frag or mail me@example.org", 512),
    ("numbers", "3.14159 1,000,000 2024-11-30 12:30pm 0x1F 1e-9", 512),
    ("whitespace", "tabs\there\nnew\r\nlines   many    spaces\u00a0nbsp\u2003em\u3000ideographic", 512),
    ("control chars", "null\x00byte bell\x07 esc\x1b[0m soft\u00adhyphen zero\u200bwidth \ufffdrepl \x0bvt\x0cff", 512),
    ("long word", f"a {long_word} b", 512),
    ("long word exactly 100", "x" * 100 + " " + "y" * 101, 512),
    ("empty", "", 512),
    ("only spaces", "   \t\n ", 512),
    ("greek", "Η γρήγορη καφέ αλεπού ΟΔΟΣ ΣΟΦΟΣ", 512),
    ("cyrillic", "Съешь же ещё этих мягких французских булок", 512),
    ("combining", "e\u0301 a\u0308 n\u0303 precomposed é ä ñ Z\u0351\u0324algo", 512),
    ("turkish dotted", "İstanbul ıi İI", 512),
    ("special tokens in text", "a [MASK] b [SEP][CLS] c[UNK]d [PAD]", 512),
    ("arabic hebrew", "مرحبا بالعالم שלום עולם", 512),
    ("devanagari thai", "नमस्ते दुनिया สวัสดีชาวโลก", 512),
    ("fullwidth", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３", 512),
    ("math", "∑ x² ≤ ∞ → λ · √2 ≠ π", 512),
    ("subwords", "unaffable transformers tokenization embeddings", 512),
    ("truncation 600+", long_text, 512),
    ("truncation short", long_text, 16),
    ("truncation to specials", "hello world", 2),
]


def main():
    tok = Tokenizer.from_file(str(MODEL))
    tok.no_padding()
    cases = []
    for label, text, max_len in CASES:
        tok.enable_truncation(max_length=max_len)
        enc = tok.encode(text)
        cases.append({"label": label, "text": text, "max_length": max_len,
                      "ids": enc.ids, "tokens": enc.tokens})
    OUT.write_text(json.dumps({"source": "tokenizers.Tokenizer.from_file(tokenizer.json)",
                               "cases": cases}, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
