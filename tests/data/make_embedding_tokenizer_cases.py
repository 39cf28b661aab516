#!/usr/bin/env python3
"""Writes tests/data/embedding_tokenizers/: a WordPiece and a RoBERTa
byte-level BPE tokenizer.json trained with Hugging Face's `tokenizers` on a
small corpus (with their BertProcessing / RobertaProcessing post-processors),
and cases.json: the ids `tokenizers` gives for single texts and for text
pairs truncated longest-first. rlx's embedding tokenizers must reproduce them.

    pip install tokenizers
    python3 tests/data/make_embedding_tokenizer_cases.py
"""
import json
import pathlib

from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer
from tokenizers.processors import BertProcessing, RobertaProcessing

OUT = pathlib.Path(__file__).resolve().parent / "embedding_tokenizers"
CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "Der schnelle braune Fuchs springt.",
    "naïve café résumé", "1234 5678 90", "What is the capital of France?", "Paris is the capital of France.",
    "Berlin is in Germany.", "Tokenizers split words into pieces.", "The weather is lovely, isn't it?",
]
TEXTS = CORPUS + ["", "   ", "  two  spaces ", "emoji 🙂 and 中文 text", "UPPER lower MiXeD", "tabs\tand\u00a0nbsp",
                  " ".join(CORPUS)]


def wordpiece():
    t = BertWordPieceTokenizer(lowercase=True)
    t.train_from_iterator(CORPUS * 4, vocab_size=180, min_frequency=1,
                          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    t._tokenizer.post_processor = BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
    return t._tokenizer


def roberta_bpe():
    t = ByteLevelBPETokenizer()
    t.train_from_iterator(CORPUS * 4, vocab_size=400, min_frequency=1,
                          special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    t._tokenizer.post_processor = RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")))
    return t._tokenizer


def main():
    cases = {"texts": TEXTS}
    for name, make in [("wordpiece", wordpiece), ("roberta_bpe", roberta_bpe)]:
        tok = make()
        (OUT / name).mkdir(parents=True, exist_ok=True)
        tok.save(str(OUT / name / "tokenizer.json"))
        singles = [tok.encode(t).ids for t in TEXTS]
        pairs = []
        for length in [7, 12, 13, 40]:
            tok.enable_truncation(max_length=length, strategy="longest_first")
            for q in [9, 0, len(TEXTS) - 1]:
                for d in range(len(TEXTS)):
                    e = tok.encode(TEXTS[q], TEXTS[d])
                    pairs.append([q, d, length, e.ids, e.type_ids])
        tok.no_truncation()
        cases[name] = {"singles": singles, "pairs": pairs}
    with open(OUT / "cases.json", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, separators=(",", ":"))


if __name__ == "__main__":
    main()
