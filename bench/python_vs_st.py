#!/usr/bin/env python3
"""rlx.SentenceEncoder against sentence_transformers.SentenceTransformer on
one GPU: the same model, fp16, batch 128, 20000 sentences of 8-40 words,
sentences per second including tokenization, in one run.

    python3 bench/python_vs_st.py                      # a random MiniLM-shaped model, made here
    python3 bench/python_vs_st.py --model models/all-MiniLM-L6-v2
    python3 bench/python_vs_st.py --write-model DIR    # only write the random model (tests/python/test_gpu.py)

Without --model it writes a MiniLM-L6-shaped BERT with random weights (6
layers, hidden 384, 12 heads, mean pooling, Normalize) and a WordPiece vocab
of its own into a temporary directory: no network needed (torch,
transformers, sentence-transformers and the rlx wheel installed).
"""

import argparse
import json
import os
import random
import tempfile
import time

import numpy as np


def words(rng, n):
    """n distinct lowercase pseudo-words of 2-10 letters."""
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10))))
    return sorted(out)


def make_minilm_shaped(root, rng, hidden=384, layers=6, heads=12, ffn=1536):
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel

    # A vocab like bert-base-uncased's in kind: specials, whole words, ## pieces, letters.
    whole = words(rng, 24000)
    pieces = ["##" + w for w in words(rng, 6000)]
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + letters + whole + pieces
    vocab = list(dict.fromkeys(vocab))
    with open(os.path.join(root, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    # tokenizer.json as Hugging Face's BERT tokenizers write it, read by rlx and by AutoTokenizer.
    BertWordPieceTokenizer(os.path.join(root, "vocab.txt"), lowercase=True).save(os.path.join(root, "tokenizer.json"))
    specials = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                "mask_token": "[MASK]"}
    with open(os.path.join(root, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512, **specials}, f)
    with open(os.path.join(root, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=ffn, max_position_embeddings=512, hidden_act="gelu")
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(root, safe_serialization=True)
    os.makedirs(os.path.join(root, "1_Pooling"), exist_ok=True)
    with open(os.path.join(root, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": hidden, "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f)
    with open(os.path.join(root, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f)
    with open(os.path.join(root, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 256, "do_lower_case": False}, f)
    return whole


def sentences(rng, vocab_words, n):
    out = []
    for _ in range(n):
        k = rng.randint(8, 40)
        s = " ".join(rng.choice(vocab_words) for _ in range(k))
        out.append(s[0].upper() + s[1:] + rng.choice(".!?"))
    return out


def best_of(reps, fn):
    times = []
    result = None
    for _ in range(reps):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a sentence-transformers model directory (default: a random MiniLM-shaped one)")
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--write-model", metavar="DIR", help="only write the random MiniLM-shaped model into DIR")
    a = ap.parse_args()
    if a.write_model:
        os.makedirs(a.write_model, exist_ok=True)
        make_minilm_shaped(a.write_model, random.Random(1234))
        return

    import torch
    from sentence_transformers import SentenceTransformer

    import rlx

    rng = random.Random(1234)
    tmp = None
    if a.model:
        model_dir = a.model
        tok = json.load(open(os.path.join(model_dir, "tokenizer.json")))["model"]["vocab"]
        pool = [w for w in tok if w.isalpha() and w.islower() and len(w) > 1]
    else:
        tmp = tempfile.TemporaryDirectory()
        model_dir = tmp.name
        pool = make_minilm_shaped(model_dir, rng)
    texts = sentences(rng, pool, a.sentences)
    warm = texts[:2000]

    rows = []
    t = time.perf_counter()
    enc = rlx.SentenceEncoder(model_dir, device="cuda", dtype="f16")
    enc.encode(warm, batch_size=a.batch)  # every bucket these lengths need, compiled
    rlx_load = time.perf_counter() - t
    rlx_s, rlx_out = best_of(a.reps, lambda: enc.encode(texts, batch_size=a.batch))
    rows.append(("rlx.SentenceEncoder", rlx_load, rlx_s))

    t = time.perf_counter()
    st = SentenceTransformer(model_dir, device="cuda")
    st.half()
    st.encode(warm, batch_size=a.batch)
    torch.cuda.synchronize()
    st_load = time.perf_counter() - t

    def st_encode():
        out = st.encode(texts, batch_size=a.batch, convert_to_numpy=True)
        torch.cuda.synchronize()
        return out

    st_s, st_out = best_of(a.reps, st_encode)
    rows.append(("sentence_transformers", st_load, st_s))

    a_ = np.asarray(rlx_out, np.float64)
    b_ = np.asarray(st_out, np.float64)
    cos = (a_ * b_).sum(1) / np.linalg.norm(a_, axis=1) / np.linalg.norm(b_, axis=1)
    print(f"model {a.model or 'random MiniLM-L6 shape'}, {a.sentences} sentences of 8-40 words, batch {a.batch}, fp16, "
          f"{torch.cuda.get_device_name()}; rlx {rlx.__version__}, sentence-transformers "
          f"{__import__('sentence_transformers').__version__}, torch {torch.__version__}")
    print("| encoder | load + warm-up s | encode s | sentences/s |")
    print("|---|---|---|---|")
    for name, load, s in rows:
        print(f"| {name} | {load:.2f} | {s:.3f} | {a.sentences / s:.0f} |")
    print(f"rlx / sentence-transformers: {st_s / rlx_s:.2f}x; cosine rlx vs sentence-transformers: "
          f"min {cos.min():.5f}, mean {cos.mean():.5f}")
    if cos.min() < 0.99:
        raise SystemExit("the two encoders disagree (cosine < 0.99)")


if __name__ == "__main__":
    main()
