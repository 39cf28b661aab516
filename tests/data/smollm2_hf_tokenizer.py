"""The SmolLM2 tokenizer as Hugging Face's `tokenizers` builds it from the
GGUF's metadata (vocabulary, merges, control tokens) with SmolLM2's
pre-tokenizer: Digits(individual_digits) then ByteLevel without a prefix
space (the GGUF's "smollm" pre-tokenizer). Shared by the reference scripts."""
import pathlib

import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
GGUF = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_tokenizer(path=GGUF):
    r = gguf.GGUFReader(str(path))
    f = r.fields

    def strings(key):
        return [bytes(f[key].parts[i]).decode("utf-8") for i in f[key].data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([tokens[i] for i, t in enumerate(types) if t == 3])
    return tok
