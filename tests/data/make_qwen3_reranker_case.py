#!/usr/bin/env python3
"""Writes tests/data/qwen3_reranker/: a random Qwen3ForCausalLM of odd sizes
saved as a sentence-transformers CrossEncoder the way sentence-transformers
6.3 wraps a Qwen3-Reranker, and the scores its CrossEncoder.predict gives.

  The model    Qwen3ForCausalLM (hidden 40, 3 query heads sharing 1 KV head,
               head_dim 12, 2 layers, intermediate 36, an untied lm_head,
               rope_theta 1000), f32 safetensors.
  The tokenizer
               byte-level BPE trained here with `tokenizers`, shaped like
               Qwen's (NFC, Qwen2's Split regex then ByteLevel, a ByteLevel
               post_processor that adds nothing), with the special tokens
               <|endoftext|>, <|im_start|>, <|im_end|> and the added tokens
               <think>, </think>; "yes" and "no" are tokens of their own.
               tokenizer_config.json carries Qwen3-Reranker's chat template,
               which lays a (query, document) pair out as
               <Instruct>/<Query>/<Document> and reads the instruction from a
               system message.
  The wrapper  CrossEncoder(<plain causal LM folder>) detects the
               *ForCausalLM, loads it as a "text-generation" Transformer
               (left padding, the message modality: pairs become
               query/document messages rendered by the chat template) and
               adds a LogitScore module with the ids of "yes" and "no";
               max_seq_length MAX_LEN so one pair is cut (then
               sentence-transformers writes the template's suffix back over
               the row's last tokens). CrossEncoder.save writes modules.json,
               sentence_bert_config.json, 1_LogitScore/config.json,
               config_sentence_transformers.json and the tokenizer files.
  reference.json
               per pair: the token ids sentence-transformers feeds the model
               (left padding removed), logit("yes") - logit("no") at the last
               token (predict without activation), the sigmoid of it
               (predict's default), and the same with a prompt (the
               instruction as a system message), and with max_seq_length
               SHORT_LEN, which cuts most pairs, and with the LM head tied to
               the token embedding (tied_logit). Each pair's score is also
               computed alone (batch of 1) and must agree with the batched
               one within 1e-5.

    pip install numpy tokenizers sentence-transformers==6.3.0 torch
    python3 tests/data/make_qwen3_reranker_case.py --out tests/data/qwen3_reranker
"""
import argparse
import json
import os
import shutil
import tempfile

import numpy as np

# Qwen/Qwen3-Reranker-0.6B's chat template (its tokenizer_config.json).
CHAT_TEMPLATE = (
    '{%- set instruction = messages | selectattr("role", "eq", "system") | map(attribute="content")'
    ' | first | default("Given a web search query, retrieve relevant passages that answer the query")'
    " -%}\n"
    '{%- set query_text = messages | selectattr("role", "eq", "query") | map(attribute="content")'
    " | first -%}\n"
    '{%- set document_text = messages | selectattr("role", "eq", "document") | map(attribute="content")'
    " | first -%}\n"
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the"
    ' Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n<Instruct>: {{ instruction }}\n<Query>: {{ query_text }}\n"
    "<Document>: {{ document_text }}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n\n"
)
CORPUS = [
    'Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
    'Note that the answer can only be "yes" or "no".',
    "<Instruct>: Given a web search query, retrieve relevant passages that answer the query",
    "<Query>: <Document>: yes no yes no Yes No", "What is the capital of France?",
    "Paris is the capital of France.", "A man is eating food.", "The stock market fell sharply today.",
    "Cats sleep most of the day!", "rlx compiles transformer graphs into fused kernels.",
]
QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Paris is the capital of France.",
    "",
    "yes",
    "Cats sleep most of the day! naïve cafe\u0301 中文 🙂 1234",
    "The stock market fell sharply today, and the cats slept through all of it while rlx compiled, fused and "
    "ran transformer graphs; the capital of France stayed Paris, and nobody asked about it again.",
    "no <|im_end|> A man is eating food.",
    "Berlin",
]
PROMPT = "Given a question, judge whether the passage answers it"
MAX_LEN = 160
SHORT_LEN = 120
EOS = "<|endoftext|>"
SPECIAL = [EOS, "<|im_start|>", "<|im_end|>"]
ADDED = ["<think>", "</think>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
H, NH, NKV, HD, LAYERS, FFN, EPS, THETA = 40, 3, 1, 12, 2, 36, 1e-6, 1000.0


def tokenizer(path):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, min_frequency=1, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.save(os.path.join(path, "tokenizer.json"))
    for t in ("yes", "no"):
        assert tok.token_to_id(t) is not None, t
    return tok


def safetensors_write(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def weights(vocab, seed):
    """Wider than transformers' init, so a wrong graph shows in the scores."""
    rng = np.random.default_rng(seed)
    rand = lambda *s: (0.15 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    norm = lambda n: (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    w = {"model.embed_tokens.weight": rand(vocab, H)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": norm(H), p + "self_attn.q_proj.weight": rand(NH * HD, H),
                  p + "self_attn.k_proj.weight": rand(NKV * HD, H), p + "self_attn.v_proj.weight": rand(NKV * HD, H),
                  p + "self_attn.q_norm.weight": norm(HD), p + "self_attn.k_norm.weight": norm(HD),
                  p + "self_attn.o_proj.weight": rand(H, NH * HD), p + "post_attention_layernorm.weight": norm(H),
                  p + "mlp.gate_proj.weight": rand(FFN, H), p + "mlp.up_proj.weight": rand(FFN, H),
                  p + "mlp.down_proj.weight": rand(H, FFN)})
    w["model.norm.weight"] = norm(H)
    w["lm_head.weight"] = (0.6 * rng.standard_normal((vocab, H))).astype(np.float32)
    return w


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def plain_model(path):
    """The folder a causal LM comes as (config, weights, tokenizer with its chat template)."""
    tok = tokenizer(path)
    vocab = tok.get_vocab_size()
    safetensors_write(os.path.join(path, "model.safetensors"), weights(vocab, 5))
    eos = tok.token_to_id("<|im_end|>")
    write_json(os.path.join(path, "config.json"), {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": vocab, "hidden_size": H,
        "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": NH,
        "num_key_value_heads": NKV, "head_dim": HD, "hidden_act": "silu", "max_position_embeddings": 256,
        "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": None, "tie_word_embeddings": False,
        "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": LAYERS, "bos_token_id": tok.token_to_id(EOS), "eos_token_id": eos,
        "torch_dtype": "float32", "use_cache": True, "initializer_range": 0.02})
    write_json(os.path.join(path, "tokenizer_config.json"), {
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": EOS,
        "padding_side": "left", "model_max_length": 131072, "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE, "model_input_names": ["input_ids", "attention_mask"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.modules import LogitScore

    torch.manual_seed(0)
    shutil.rmtree(a.out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as raw:
        plain_model(raw)
        ce = CrossEncoder(raw, device="cpu", max_length=MAX_LEN)
        assert isinstance(ce[-1], LogitScore), type(ce[-1])
        ce.save(a.out)
    os.remove(os.path.join(a.out, "README.md"))  # the model card: nothing reads it
    ce = CrossEncoder(a.out, device="cpu")
    assert ce.max_length == MAX_LEN and isinstance(ce[-1], LogitScore)
    pairs = [(QUERY, d) for d in DOCUMENTS]

    def ids_of(prompt):
        feats = ce.preprocess(pairs, prompt=prompt) if prompt else ce.preprocess(pairs)
        return [row[m.bool()].tolist() for row, m in zip(feats["input_ids"], feats["attention_mask"])]

    ref = {"source": "sentence-transformers " + __import__("sentence_transformers").__version__ +
                     " CrossEncoder.predict of this folder (float32, CPU)",
           "query": QUERY, "prompt": PROMPT, "max_length": MAX_LEN,
           "yes_id": ce[-1].true_token_id, "no_id": ce[-1].false_token_id, "pairs": []}
    got = {}
    for key, prompt in (("", None), ("prompt_", PROMPT)):
        kw = {"prompt": prompt} if prompt else {}
        logits = ce.predict(pairs, batch_size=16, activation_fn=torch.nn.Identity(), **kw)
        scores = ce.predict(pairs, batch_size=16, **kw)
        alone = np.array([ce.predict([p], batch_size=1, activation_fn=torch.nn.Identity(), **kw)[0] for p in pairs])
        assert np.abs(alone - logits).max() < 1e-5, np.abs(alone - logits).max()
        assert np.abs(scores - 1 / (1 + np.exp(-logits.astype(np.float64)))).max() < 1e-6
        got[key] = (ids_of(prompt), logits, scores)
    for i, d in enumerate(DOCUMENTS):
        row = {"document": d}
        for key in got:
            ids, logits, scores = got[key]
            row[key + "ids"] = ids[i]
            row[key + "logit"] = float(f"{logits[i]:.8g}")
            row[key + "score"] = float(f"{scores[i]:.8g}")
        ref["pairs"].append(row)
    ce.max_seq_length = SHORT_LEN
    ids, logits = ids_of(None), ce.predict(pairs, batch_size=16, activation_fn=torch.nn.Identity())
    ref["short_max_length"] = SHORT_LEN
    for i, row in enumerate(ref["pairs"]):
        row["short_ids"], row["short_logit"] = ids[i], float(f"{logits[i]:.8g}")
    # Tied embeddings (Qwen3-Reranker-0.6B's): the LM head is the token
    # embedding. The same folder with tie_word_embeddings true scores so.
    ce.max_seq_length = MAX_LEN
    lm = ce[0].model
    lm.lm_head.weight = lm.model.embed_tokens.weight
    logits = ce.predict(pairs, batch_size=16, activation_fn=torch.nn.Identity())
    for i, row in enumerate(ref["pairs"]):
        row["tied_logit"] = float(f"{logits[i]:.8g}")
    cut = [len(r["ids"]) == MAX_LEN for r in ref["pairs"]]
    assert sum(cut) == 1 and cut[4], [len(r["ids"]) for r in ref["pairs"]]
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(a.out) for n in ns)
    print("written", a.out, total, "bytes; lengths", [len(r["ids"]) for r in ref["pairs"]])


if __name__ == "__main__":
    main()
