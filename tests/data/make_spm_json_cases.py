#!/usr/bin/env python3
"""Writes tests/data/spm_json_tokenizer.json and spm_json_cases.json: a
SentencePiece-style BPE tokenizer.json (byte_fallback, fuse_unk, <0xNN>
byte tokens, added special and non-special tokens) built with Hugging Face's
`tokenizers`, and how `tokenizers` encodes a varied corpus with it under each
pipeline variant the Llama 2 / Mistral / Gemma directories use: normalizers
Prepend("▁") + Replace(" ", "▁") (Llama 2, Mistral), Replace only (Gemma),
and the Metaspace pre-tokenizer with each prepend_scheme and split. Each
variant is the JSON of its normalizer, pre-tokenizer, decoder and
post-processor (the test splices them into the base file) with, per text,
the ids with special tokens parsed, the ids with them left as text
(encode_special_tokens) and the decoded text.

Also spm_json_split_cases.json: the DeepSeek LLM / Coder and Falcon
pre-tokenizer sequences as their tokenizer.json files write them, spliced
into tests/data/bpe_trained_tokenizer.json, with the ids `tokenizers` gives.

    pip install tokenizers
    python3 tests/data/make_spm_json_cases.py
"""
import json
import pathlib
import random

from tokenizers import Tokenizer, models, trainers, normalizers, pre_tokenizers, decoders, processors
from tokenizers import AddedToken

HERE = pathlib.Path(__file__).resolve().parent
SP = "\u2581"

TRAIN = [
    "The quick brown fox jumps over the lazy dog.", "Hello world! Hello there, hello again.",
    "Tokenizers split text into pieces; merges join them back.", "in the beginning was the word",
    "def main():\n    return 42\n", "Numbers 123 4567 89, dates 2024-01-31.", "café naïve résumé über straße",
    "Привет мир, как дела?", "中文 测试 一下", "one two three four five six seven eight nine ten",
    "It's a test. Isn't it? We'll see, they're here.", "  indented   spaces   everywhere  ",
] * 20


def base_tokenizer():
    # Train a small BPE over text as Llama 2's normalizer leaves it, then add
    # the 256 byte tokens and the specials SentencePiece vocabularies have.
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  initial_alphabet=[SP])
    t.train_from_iterator(TRAIN, trainer)
    j = json.loads(t.to_str())
    vocab = j["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    j["model"]["vocab"] = vocab
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken("<|im_end|>", special=True, normalized=False),
                            AddedToken("<start_of_turn>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("<user_tok>", special=False, normalized=False)])
    return json.loads(tok.to_str())


def replace_decoders(strip):
    d = [decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse()]
    if strip:
        d.append(decoders.Strip(" ", 1, 0))
    return decoders.Sequence(d)


def template(bos, eos=None):
    single = f"{bos} $A" + (f" {eos}" if eos else "")
    specials = [(bos, 1)] + ([(eos, 2)] if eos else [])
    return processors.TemplateProcessing(single=single, special_tokens=specials)


def variants():
    out = {
        "llama2": (normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)]), None,
                   replace_decoders(True), template("<s>")),
        "gemma": (normalizers.Replace(" ", SP), None, replace_decoders(False), template("<s>", "</s>")),
    }
    for scheme in ("first", "always", "never"):
        for split in (True, False):
            out[f"metaspace-{scheme}-{'split' if split else 'nosplit'}"] = (
                None, pre_tokenizers.Metaspace(replacement=SP, prepend_scheme=scheme, split=split),
                decoders.Metaspace(replacement=SP, prepend_scheme=scheme, split=split), template("<s>"))
    return out


HAND = [
    "Hello world", " Hello world", "  Hello   world  ", "Hello\nworld\n\n", "\n", " ", "   ", "a",
    "The quick brown fox", "It's a test. Isn't it?", "café naïve résumé", "über straße", "Привет мир",
    "中文测试", "日本語のテキスト", "emoji 🦙🚀 and 👍🏽", "tab\there", "x\r\ny", "\u00a0nbsp", "zero\u200bwidth",
    "<|im_end|>", "Hello<|im_end|>world", " <|im_end|> ", "<s>Hello</s>", "text <s> more", "<start_of_turn>user\nHi",
    "<user_tok> and <user_tok>x", "a<user_tok>b<|im_end|>c", "<|im_end", "<unk>", "\u0301accent", "ǅungla",
    "123 4567 89", "def main():\n    return 42\n", "ÿþý", "\x01\x02 control", "mixed 中 and ü and 🦙",
]
CLASSES = ["the", "hello", "world", "abc", "XYZ", "é", "ü", "ß", "ж", "мир", "中", "文", "🦙", "👍🏽", "1", "42", ".", ",",
           "!", "?", "'s", " ", "  ", "   ", "\n", "\t", "<|im_end|>", "<s>", "</s>", "<user_tok>", "\u2581", "ÿ", "~"]


def corpus():
    rng = random.Random(22)
    out = list(HAND)
    for _ in range(120):
        out.append("".join(rng.choice(CLASSES) for _ in range(rng.randint(1, 9))))
    return out


def with_parts(base, parts):
    j = json.loads(json.dumps(base))
    for key, obj in zip(("normalizer", "pre_tokenizer", "decoder", "post_processor"), parts):
        if obj is None:
            j[key] = None
        else:
            t = Tokenizer(models.BPE())
            setattr(t, key, obj)
            j[key] = json.loads(t.to_str())[key]
    return j


def encode_cases(j, texts):
    tok = Tokenizer.from_str(json.dumps(j))
    cases = []
    for t in texts:
        tok.encode_special_tokens = False
        parsed = tok.encode(t).ids
        tok.encode_special_tokens = True
        plain = tok.encode(t).ids
        cases.append([t, parsed, plain, tok.decode(plain, skip_special_tokens=True)])
    return cases


# The pre-tokenizer sequences as the models' tokenizer.json files write them
# (the same regexes as make_pre_tokenizer_cases.py).
def split_sequences():
    import make_pre_tokenizer_cases as pc  # noqa: E402 (beside this script)
    return {name: pc.RULES[name] for name in ("deepseek-llm", "deepseek-coder", "falcon")}


def main():
    base = base_tokenizer()
    texts = corpus()
    parts = {}
    cases = {}
    for name, p in variants().items():
        j = with_parts(base, p)
        parts[name] = {k: j[k] for k in ("normalizer", "pre_tokenizer", "decoder", "post_processor")}
        cases[name] = encode_cases(j, texts)
    base_out = dict(base)
    base_out.update(parts["llama2"])
    (HERE / "spm_json_tokenizer.json").write_text(json.dumps(base_out, ensure_ascii=False) + "\n", encoding="utf-8")
    (HERE / "spm_json_cases.json").write_text(
        json.dumps({"variants": parts, "cases": cases}, ensure_ascii=False, separators=(",", ":")) + "\n",
        encoding="utf-8")

    byte_base = json.loads((HERE / "bpe_trained_tokenizer.json").read_text(encoding="utf-8"))
    split_cases = {}
    for name, rule in split_sequences().items():
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = rule
        j = dict(byte_base)
        j["pre_tokenizer"] = json.loads(t.to_str())["pre_tokenizer"]
        tok = Tokenizer.from_str(json.dumps(j))
        split_cases[name] = {"pre_tokenizer": j["pre_tokenizer"],
                             "cases": [[s, tok.encode(s).ids] for s in texts[:120]]}
    (HERE / "spm_json_split_cases.json").write_text(
        json.dumps(split_cases, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{len(texts)} texts x {len(cases)} variants; {len(split_cases)} split sequences")


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(HERE))
    main()
