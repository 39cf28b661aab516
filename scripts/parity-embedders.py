#!/usr/bin/env python3
"""Embedding and reranking parity of `rlx embed` / `rlx rerank` against
sentence-transformers, on tiny random models of every family rlx runs.

Each model is made here, offline: a tokenizer trained with `tokenizers` on a
small corpus (WordPiece for BERT and DistilBERT, byte-level BPE with
RobertaProcessing for RoBERTa), a randomly initialised transformers model of
odd sizes, saved as a Hugging Face directory with sentence-transformers'
modules. Then rlx runs through its command line on each device and dtype and
its rows are compared with SentenceTransformer.encode / CrossEncoder.predict:

  embeddings: cosine >= 0.9999 (f32) / 0.999 (f16, bf16) for every row
  rerank:     |score - CrossEncoder.predict| <= 1e-4 (f32) / 2e-2 (f16, bf16)

Controls checked on the BERT model: every pooling mode (as the model's own
and as --pooling), a Dense module, --no-normalize, --dimensions (Matryoshka), prompts
(--prompt-name from config_sentence_transformers.json, and the default
prompt), and a Hub id resolved from a cache laid out as huggingface_hub does.

  python3 scripts/parity-embedders.py --rlx build/rlx [--devices cpu,cuda] [--keep DIR]

Exits non-zero when any check fails; the table is printed last.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "Der schnelle braune Fuchs springt.",
    "naïve café résumé", "1234 5678 90", "What is the capital of France?", "Paris is the capital of France.",
    "Berlin is in Germany.", "Tokenizers split words into pieces.", "The weather is lovely, isn't it?",
]
TEXTS = CORPUS + ["", "   ", "A man is eating food.", " ".join(CORPUS) * 3, "emoji 🙂 and 中文 text"]
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Berlin is in Germany.", "", "Cats sleep most of the day!",
        " ".join(CORPUS) * 2]


def wordpiece_tokenizer(path, family):
    from tokenizers import BertWordPieceTokenizer
    from tokenizers.processors import BertProcessing
    from transformers import BertTokenizerFast, DistilBertTokenizerFast
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(CORPUS * 4, vocab_size=180, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    # Trained from nothing, the tokenizer has no post-processor yet: [CLS] a [SEP] (b [SEP]).
    tok._tokenizer.post_processor = BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    # DistilBERT's tokenizer gives no token_type_ids, which its model does not take.
    cls = DistilBertTokenizerFast if family == "distilbert" else BertTokenizerFast
    fast = cls(tokenizer_object=tok._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                             pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", do_lower_case=True)
    fast.save_pretrained(path)
    return fast


def bpe_tokenizer(path):
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaTokenizerFast
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS * 4, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok._tokenizer.post_processor = RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    fast = RobertaTokenizerFast(tokenizer_object=tok._tokenizer, bos_token="<s>", eos_token="</s>",
                                sep_token="</s>", cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
                                mask_token="<mask>")
    fast.save_pretrained(path)
    return fast


def randomize(model, seed):
    # transformers' init (std 0.02) makes every output nearly the same; wider
    # weights and non-trivial norms make a wrong graph visible.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def make_model(family, path, classifier=False, seed=0):
    import transformers as T
    tok = bpe_tokenizer(path) if family == "roberta" else wordpiece_tokenizer(path, family)
    v = len(tok)
    if family == "bert":
        cfg = T.BertConfig(vocab_size=v, hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
                           intermediate_size=61, max_position_embeddings=72, type_vocab_size=2)
        cls = T.BertForSequenceClassification if classifier else T.BertModel
    elif family == "roberta":
        cfg = T.RobertaConfig(vocab_size=v, hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
                              intermediate_size=61, max_position_embeddings=74, type_vocab_size=1,
                              pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id)
        cls = T.RobertaForSequenceClassification if classifier else T.RobertaModel
    else:
        cfg = T.DistilBertConfig(vocab_size=v, dim=36, n_layers=2, n_heads=3, hidden_dim=61,
                                 max_position_embeddings=72, pad_token_id=tok.pad_token_id)
        cls = T.DistilBertForSequenceClassification if classifier else T.DistilBertModel
    if classifier:
        cfg.num_labels = 1
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    randomize(model, seed)
    model.save_pretrained(path, safe_serialization=True)
    return tok


def make_sentence_model(family, path, pooling="mean", normalize=True, prompts=None, default_prompt=None, dense=0):
    from sentence_transformers import SentenceTransformer, models
    raw = path + "-hf"
    make_model(family, raw)
    word = models.Transformer(raw, max_seq_length=64)
    mods = [word, models.Pooling(word.get_word_embedding_dimension(), pooling_mode=pooling)]
    if dense:
        mods.append(models.Dense(word.get_word_embedding_dimension(), dense, activation_function=torch.nn.Tanh()))
    if normalize:
        mods.append(models.Normalize())
    st = SentenceTransformer(modules=mods, device="cpu", prompts=prompts or {}, default_prompt_name=default_prompt)
    st.save(path)
    shutil.rmtree(raw)
    return SentenceTransformer(path, device="cpu")


def run_rlx(rlx, args, env=None):
    r = subprocess.run([rlx] + args, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise RuntimeError(f"rlx {' '.join(args[:6])}... exited {r.returncode}: {r.stderr.strip()[-600:]}")
    return r.stdout


def rlx_embed(rlx, model, texts, work, device, dtype, extra=(), env=None):
    src = os.path.join(work, "texts.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    out = os.path.join(work, "out.npy")
    run_rlx(rlx, ["embed", "--device", device, "--dtype", dtype, "--model", model, "--file", src, "-o", out,
                  *extra], env)
    got = np.load(out)
    assert got.shape[0] == len(texts), f"{got.shape[0]} rows for {len(texts)} lines"
    return got


def min_cosine(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    num = (a * b).sum(1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float((num / np.maximum(den, 1e-30)).min()), float(np.abs(a - b).max())


class Table:
    def __init__(self):
        self.rows, self.failed = [], 0

    def add(self, what, device, dtype, value, limit, ok, detail=""):
        self.failed += not ok
        self.rows.append(f"| {what:<34} | {device:<4} | {dtype:<4} | {value:<22} | {limit:<10} | "
                         f"{'ok' if ok else 'FAIL'} {detail}")

    def error(self, what, device, dtype, e):
        self.failed += 1
        self.rows.append(f"| {what:<34} | {device:<4} | {dtype:<4} | ERROR {e}")


def embed_check(t, rlx, what, model_dir, want, texts, work, devices, extra=(), env=None):
    for device in devices:
        for dtype in (["f32"] if device == "cpu" else ["f32", "f16", "bf16"]):
            try:
                got = rlx_embed(rlx, model_dir, texts, work, device, dtype, extra, env)
                cos, diff = min_cosine(got, want)
                limit = 0.9999 if dtype == "f32" else 0.999
                t.add(what, device, dtype, f"cos {cos:.6f} max|d| {diff:.1e}", f">= {limit}", cos >= limit)
            except Exception as e:  # noqa: BLE001 - reported in the table
                t.error(what, device, dtype, e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default="build/rlx")
    ap.add_argument("--devices", default="cpu,cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--keep", help="keep the models in this directory")
    a = ap.parse_args()
    devices = a.devices.split(",")
    from sentence_transformers import CrossEncoder, SentenceTransformer, models
    root = a.keep or tempfile.mkdtemp(prefix="rlx-parity-")
    os.makedirs(root, exist_ok=True)
    t = Table()
    for family in ["bert", "roberta", "distilbert"]:
        d = os.path.join(root, f"{family}-st")
        st = make_sentence_model(family, d)
        want = st.encode(TEXTS, convert_to_numpy=True, batch_size=8)
        embed_check(t, a.rlx, f"{family} mean+normalize", d, want, TEXTS, root, devices)
        ce_dir = os.path.join(root, f"{family}-ce")
        make_model(family, ce_dir, classifier=True, seed=3)
        ce = CrossEncoder(ce_dir, device="cpu", max_length=64)
        want_scores = ce.predict([(QUERY, doc) for doc in DOCS])
        with open(os.path.join(root, "docs.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(DOCS) + "\n")
        for device in devices:
            for dtype in (["f32"] if device == "cpu" else ["f32", "f16", "bf16"]):
                try:
                    out = json.loads(run_rlx(a.rlx, ["rerank", "--device", device, "--dtype", dtype, "--model",
                                                     ce_dir, "--max-length", "64", "--query", QUERY, "--file",
                                                     os.path.join(root, "docs.txt")]))
                    got = np.zeros(len(DOCS))
                    for r in out["results"]:
                        got[r["index"]] = r["score"]
                    diff = float(np.abs(got - np.asarray(want_scores, np.float64)).max())
                    limit = 1e-4 if dtype == "f32" else 2e-2
                    t.add(f"{family} cross-encoder scores", device, dtype, f"max|d| {diff:.1e}", f"<= {limit}",
                          diff <= limit)
                except Exception as e:  # noqa: BLE001
                    t.error(f"{family} cross-encoder scores", device, dtype, e)

    # Controls, on BERT.
    for mode in ["cls", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]:
        d = os.path.join(root, f"bert-{mode}")
        st = make_sentence_model("bert", d, pooling=mode, normalize=False)
        embed_check(t, a.rlx, f"bert pooling {mode} (model's)", d, st.encode(TEXTS, convert_to_numpy=True), TEXTS,
                    root, devices)
    base = os.path.join(root, "bert-st")
    st = make_sentence_model("bert", os.path.join(root, "bert-plain"), normalize=False)
    plain = os.path.join(root, "bert-plain")
    for mode, flag in [("max", "max"), ("cls", "cls"), ("lasttoken", "lasttoken")]:
        word = st[0]
        other = SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), mode)],
                                    device="cpu")
        embed_check(t, a.rlx, f"bert --pooling {flag}", plain, other.encode(TEXTS, convert_to_numpy=True), TEXTS,
                    root, devices, ["--pooling", flag])
    st_norm = SentenceTransformer(base, device="cpu")
    trunc = SentenceTransformer(base, device="cpu", truncate_dim=13)
    embed_check(t, a.rlx, "bert --dimensions 13", base,
                trunc.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True), TEXTS, root, devices,
                ["--dimensions", "13"])
    pd = os.path.join(root, "bert-prompts")
    pst = make_sentence_model("bert", pd, prompts={"query": "query: ", "passage": "passage: "},
                              default_prompt="passage")
    embed_check(t, a.rlx, "bert default prompt", pd, pst.encode(TEXTS, convert_to_numpy=True), TEXTS, root, devices)
    embed_check(t, a.rlx, "bert --prompt-name query", pd, pst.encode(TEXTS, prompt_name="query", convert_to_numpy=True),
                TEXTS, root, devices, ["--prompt-name", "query"])
    # --no-normalize on a normalizing model equals the same model without Normalize.
    nn_st = SentenceTransformer(modules=[st_norm[0], st_norm[1]], device="cpu")
    embed_check(t, a.rlx, "bert --no-normalize", base, nn_st.encode(TEXTS, convert_to_numpy=True), TEXTS, root,
                devices, ["--no-normalize"])
    dd = os.path.join(root, "bert-dense")
    dst = make_sentence_model("bert", dd, pooling="cls", dense=17)
    embed_check(t, a.rlx, "bert cls+Dense(17, tanh)+normalize", dd, dst.encode(TEXTS, convert_to_numpy=True), TEXTS,
                root, devices)
    # A Hub id from a cache laid out as huggingface_hub lays it out.
    cache = os.path.join(root, "hub")
    snap = os.path.join(cache, "models--org--tiny-bert", "snapshots", "0123abcd")
    os.makedirs(os.path.dirname(snap), exist_ok=True)
    shutil.copytree(base, snap, dirs_exist_ok=True)
    os.makedirs(os.path.join(cache, "models--org--tiny-bert", "refs"), exist_ok=True)
    with open(os.path.join(cache, "models--org--tiny-bert", "refs", "main"), "w") as f:
        f.write("0123abcd")
    embed_check(t, a.rlx, "bert by Hub id (HF_HUB_CACHE)", "org/tiny-bert", st_norm.encode(TEXTS, convert_to_numpy=True),
                TEXTS, root, ["cpu"], env={"HF_HUB_CACHE": cache})

    print("| check                              | dev  | type | value                  | limit      | result")
    print("|------------------------------------|------|------|------------------------|------------|-------")
    print("\n".join(t.rows))
    print(f"\n{len(t.rows) - t.failed} passed, {t.failed} failed")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
