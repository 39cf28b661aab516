#!/usr/bin/env python3
"""Writes tests/data/bert_cross_encoder/: a random BertForSequenceClassification
of odd sizes saved as a sentence-transformers CrossEncoder, and what its
CrossEncoder.predict and CrossEncoder.rank give, for the Python package's
tests (whose environment has no torch).

  The model    BertForSequenceClassification, one label (hidden 24, 2 layers
               of 2 heads, intermediate 40, 64 positions, 2 token types),
               f32 safetensors, weights scaled so the scores spread.
  The tokenizer
               WordPiece over a small vocabulary written here (lower-cased
               words, single characters and their ## continuations), so
               any ASCII text tokenizes and unknown characters are [UNK].
  The wrapper  CrossEncoder(<folder>, max_length=MAX_LEN).save(): modules.json,
               sentence_bert_config.json, config_sentence_transformers.json
               (activation Sigmoid) and the tokenizer files.
  reference.json
               pairs of several queries (an empty document, an empty query,
               a pair MAX_LEN cuts, non-ASCII text among them) with
               predict's scores (sigmoid) and logits (activation_fn
               Identity); rank() of one query over its documents, whole and
               with top_k and return_documents.

    pip install numpy sentence-transformers==6.3.0 torch
    python3 tests/data/make_bert_cross_encoder_case.py --out tests/data/bert_cross_encoder
"""
import argparse
import json
import os
import shutil
import string
import tempfile

MAX_LEN = 40
WORDS = ("the a is of and to in capital france paris berlin germany city cat cats dog sleep sleeps day "
         "what where who river stock market fell today food eating man woman meal rlx fast model").split()

QUERY = "what is the capital of france"
DOCUMENTS = [
    "paris is the capital of france",
    "",
    "berlin is the capital of germany",
    "the cat sleeps most of the day",
    "a man is eating food",
    "the stock market fell today, and the cats slept through all of it while rlx ran fast " * 3,
    "Paris!",
    "naïve café 中文 42",
    "paris is the capital of france",  # a duplicate: the same score, kept apart in rank()
]
OTHER_PAIRS = [
    ["who sleeps all day", "the cat sleeps most of the day"],
    ["", "an empty query"],
    ["who sleeps all day", "the stock market fell"],
    ["where is berlin", "berlin is a city in germany"],
]


def vocab():
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    return specials + WORDS + chars + ["##" + c for c in string.ascii_lowercase + string.digits]


def write_model(path):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab()) + "\n")
    tok = BertTokenizerFast(os.path.join(path, "vocab.txt"), do_lower_case=True, model_max_length=MAX_LEN)
    tok.save_pretrained(path)
    cfg = BertConfig(vocab_size=len(vocab()), hidden_size=24, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=40, max_position_embeddings=64, type_vocab_size=2, num_labels=1,
                     hidden_act="gelu", architectures=["BertForSequenceClassification"])
    torch.manual_seed(11)
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)  # larger than the default 0.02, so pairs score apart
    model.save_pretrained(path, safe_serialization=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    from sentence_transformers import CrossEncoder
    import sentence_transformers

    shutil.rmtree(a.out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as raw:
        write_model(raw)
        CrossEncoder(raw, device="cpu", max_length=MAX_LEN).save(a.out)
    os.remove(os.path.join(a.out, "README.md"))  # the generated model card: nothing rlx reads
    ce = CrossEncoder(a.out, device="cpu")
    assert ce.max_seq_length == MAX_LEN, ce.max_seq_length
    pairs = [[QUERY, d] for d in DOCUMENTS] + OTHER_PAIRS
    scores = ce.predict(pairs, batch_size=4)
    logits = ce.predict(pairs, batch_size=4, activation_fn=torch.nn.Identity())
    cut = [len(ce.tokenizer(q, d)["input_ids"]) > MAX_LEN for q, d in pairs]
    assert any(cut) and not all(cut), cut
    ref = {
        "source": f"sentence-transformers {sentence_transformers.__version__} CrossEncoder.predict and .rank "
                  "of this folder (float32, CPU)",
        "max_length": MAX_LEN,
        "pairs": [{"query": q, "document": d, "score": float(s), "logit": float(l), "cut": c}
                  for (q, d), s, l, c in zip(pairs, scores, logits, cut)],
        "rank": {
            "query": QUERY,
            "documents": DOCUMENTS,
            "all": ce.rank(QUERY, DOCUMENTS),
            "top_3_with_documents": ce.rank(QUERY, DOCUMENTS, top_k=3, return_documents=True),
            "logits": ce.rank(QUERY, DOCUMENTS, activation_fn=torch.nn.Identity()),
        },
    }
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
