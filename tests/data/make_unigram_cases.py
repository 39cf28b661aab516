#!/usr/bin/env python3
"""Writes the Unigram references rlx's tokenizer must reproduce: a unigram
vocabulary trained here with Hugging Face's `tokenizers` (Metaspace, no
normalizer) saved as tests/data/unigram_tokenizer.json, the same with 256
<0xNN> pieces and byte_fallback as tests/data/unigram_bytes_tokenizer.json,
and tests/data/unigram_cases.json: the ids of both for the pre-tokenizer
corpus (tests/data/pre_tokenizer_cases.json's texts) and a few more.

    pip install tokenizers
    python3 tests/data/make_unigram_cases.py
"""
import json
import pathlib

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

DATA = pathlib.Path(__file__).resolve().parent
TRAIN = ["The quick brown fox jumps over the lazy dog.", "Tokenizers split words into pieces by probability.",
         "the theory of the thing", "numbers 123 4567 and more", "naïve café résumé", "中文 测试 中文字符"] * 20


def build(byte_fallback, corpus):
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>",
                                      shrinking_factor=0.75)
    tok.train_from_iterator(TRAIN + corpus * 3, trainer)
    j = json.loads(tok.to_str())
    if byte_fallback:
        low = min(s for _, s in j["model"]["vocab"]) - 1.0
        j["model"]["vocab"] += [[f"<0x{b:02X}>", low] for b in range(256)]
        j["model"]["byte_fallback"] = True
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    return tok


def main():
    texts = [c[0] for c in json.loads((DATA / "pre_tokenizer_cases.json").read_text(encoding="utf-8"))["gpt2"]]
    texts += ["", " ", "  two  spaces ", "<s>hello</s> world", "unknown ☃ snowman ☃☃ run", "x</s>y"]
    cases = {}
    for name, fallback in (("plain", False), ("bytes", True)):
        tok = build(fallback, texts[:200])
        path = DATA / ("unigram_tokenizer.json" if not fallback else "unigram_bytes_tokenizer.json")
        tok.save(str(path))
        cases[name] = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in texts]
    (DATA / "unigram_cases.json").write_text(json.dumps(cases, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(texts)} texts x 2 tokenizers")


if __name__ == "__main__":
    main()
