#!/usr/bin/env python3
"""Writes tests/data/pre_tokenizer_cases.json: how Hugging Face's `tokenizers`
pre-tokenizes a corpus with each splitting rule rlx implements, as the
models' tokenizer.json files write them (llama.cpp copies the same regexes
into llama-vocab.cpp). Each case is a text and its pieces, as the
byte-mapped strings ByteLevel gives them. The corpus is hand-picked
boundaries (letters, digits, punctuation, symbols, newlines, CJK, Hangul,
emoji, combining marks, odd spaces) plus seeded random strings over the same
classes, so rules are compared on text llama.cpp's vectors lack.

    pip install tokenizers
    python3 tests/data/make_pre_tokenizer_cases.py
"""
import json
import pathlib
import random

from tokenizers import Regex, pre_tokenizers as pt

OUT = pathlib.Path(__file__).resolve().parent / "pre_tokenizer_cases.json"

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_LETTERS = (
    "\\s?[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
    "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-"
    "\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57"
    "\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-"
    "\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-"
    "\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
    "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-"
    "\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-"
    "\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943]+")
DEEPSEEK_PUNCT = "\\s?[!-/:-~！-／：-～‘-‟\u3000-。]+"
CJK = "[一-龥ࠀ-一가-\ud7ff]+"


def split(pattern):
    return pt.Split(Regex(pattern), behavior="isolated", invert=False)


def byte_level():
    return pt.ByteLevel(add_prefix_space=False, use_regex=False)


RULES = {
    "gpt2": pt.ByteLevel(add_prefix_space=False, use_regex=True),
    "starcoder": pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)]),
    "llama3": pt.Sequence([split(LLAMA3), byte_level()]),
    "qwen2": pt.Sequence([split(QWEN2), byte_level()]),
    "qwen35": pt.Sequence([split(QWEN35), byte_level()]),
    "tekken": pt.Sequence([split(TEKKEN), byte_level()]),
    "deepseek-llm": pt.Sequence([split(r"[\r\n]"), split(DEEPSEEK_LETTERS), split(DEEPSEEK_PUNCT), split(r"\s+$"),
                                 split(CJK), split(r"\p{N}+"), byte_level()]),
    "deepseek-coder": pt.Sequence([split(r"[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split(CJK),
                                   split(r"\p{N}"), byte_level()]),
    "falcon": pt.Sequence([pt.Punctuation(behavior="contiguous"), pt.ByteLevel(add_prefix_space=False, use_regex=True),
                           pt.Digits(individual_digits=False), split("[0-9][0-9][0-9]")]),
}

HAND = [
    "Hello world", " Hello  world ", "don't WE'LL they'Re I'M", "x'y 's 'S", "1234567 12 1.5e10 -42",
    "abc123def 4567", "a,b;;c!! ?? ...", "$+<=>^`|~ #@%&*", "line\nnext\r\nthird\n\n\nend\n", "tab\there \t x",
    "  \n  ", "\n", " ", "   leading and trailing   ", "中文字符测试 와 한국어 テスト",
    "emoji 🦙🚀 and 👍🏽 x", "café naïve résumé", "e\u0301 a\u0308b \u0301x", "full-width ＡＢＣ１２３！？",
    "“quotes” ‘single’ «guillemets»", "Ωμέγα Δ ℃ ℕ", "²³¹ ¼½¾ x²", "\u00a0nbsp\u3000ideo\u2009thin",
    "a\u200bzero width", "مرحبا بالعالم ١٢٣", "हिन्दी भाषा", "Привет, мир!", "x  \n  y", "3.14159...",
    "<|im_end|> <s> [INST]", "HelloWorld camelCase XMLHttpRequest ABCdef aBC", "ǅungla ʰaʰ Ǆ ǅa",
    "中文Abc 文a A文 a\u0301B \u0301A", "path/to/file.txt!\n/next //x", "'s don't ÉCOLE École", "a/b\\c", "__init__ self._x", "((a))[[b]]{{c}}", "!!!\n\n", "？！。、",
]

CLASSES = ["abcXYZ", "ABCabc", "ǅǄʰ", "XYz", "éàüÑß", "αβΓΩ", "中文字", "한국", "ひらがなカ", "0123456789", "٠١٢", "²½", ".,;:!?'\"",
           "$+<=>^`|~", "-_/\\()[]{}", "“”‘’«»", "！？。、（）", "🦙👍🏽🚀", "\u0301\u0308", " ", "  ", "\t", "\n",
           "\r\n", "\u00a0\u3000\u2009", "'s'LL'd"]


def corpus():
    rng = random.Random(29)
    out = list(HAND)
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 8)):
            c = rng.choice(CLASSES)
            parts.append("".join(rng.choice(c) for _ in range(rng.randint(1, 4))) if len(c) > 2 else c)
        out.append("".join(parts))
    return out


def main():
    texts = corpus()
    cases = {name: [[t, [p for p, _ in rule.pre_tokenize_str(t)]] for t in texts] for name, rule in RULES.items()}
    OUT.write_text(json.dumps(cases, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(texts)} texts x {len(RULES)} rules")


if __name__ == "__main__":
    main()
