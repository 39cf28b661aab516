#!/usr/bin/env python3
"""Writes tests/data/embedding_tokenizers/xlmr_unigram/: an XLM-RoBERTa-style
tokenizer.json and cases.json, the ids Hugging Face's `tokenizers` gives for
it, which rlx must reproduce exactly.

The tokenizer is what transformers' XLMRobertaConverter makes of a
SentencePiece unigram model, at a small size: a unigram vocabulary trained
here by `sentencepiece` on a small multilingual corpus, fairseq's ids
(<s> <pad> </s> <unk>, the pieces, <mask>), the normalizer Sequence
[Precompiled, Replace(" {2,}" -> " ")], Metaspace and the
<s> A </s></s> B </s> template. The Precompiled character map is a real one
compiled by sentencepiece: its nmt_nfkc rules (read out of the nmt_nfkc map's
double-array trie), kept to the scripts the cases use so the file stays small.

cases.json: for each text the normalizer's output and the ids; pairs, and
texts and pairs truncated longest-first; and the ids with the pre-tokenizer
transformers 5 writes for XLM-R (WhitespaceSplit, then Metaspace).

    pip install tokenizers sentencepiece protobuf
    python3 tests/data/make_xlmr_tokenizer_cases.py
"""
import base64
import json
import pathlib
import random
import tempfile
import unicodedata

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

OUT = pathlib.Path(__file__).resolve().parent / "embedding_tokenizers" / "xlmr_unigram"

CORPUS = [
    "The quick brown fox jumps over the lazy dog.", "A man is eating food.", "What is the capital of France?",
    "Paris is the capital of France.", "Tokenizers split words into pieces.", "naïve café résumé déjà vu",
    "Der schnelle braune Fuchs springt über den faulen Hund.", "Größe, Straße und Übermaß.",
    "Le cœur a ses raisons que la raison ne connaît point.", "¿Dónde está la biblioteca? ¡Aquí!",
    "Быстрая коричневая лиса прыгает через ленивую собаку.", "Привет, как дела?",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.", "Καλημέρα κόσμε",
    "الثعلب البني السريع يقفز فوق الكلب الكسول", "مَرْحَبًا بِكُمْ", "שלום עולם, מה שלומך?",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।", "नमस्ते दुनिया", "สวัสดีชาวโลก เขาไม่ได้พูดสักคำ",
    "敏捷的棕色狐狸跳过了懒狗。", "中文 测试 中文字符 北京大学", "素早い茶色の狐が怠惰な犬を飛び越える。",
    "カタカナ ひらがな 漢字", "빠른 갈색 여우가 게으른 개를 뛰어넘는다.", "안녕하세요 세계",
    "Tiếng Việt có dấu: người, được, những.", "Türkçe: ığüşöç İstanbul", "Polski: zażółć gęślą jaźń",
    "numbers 123 4567 89.5% and more", "e-mail: someone@example.com, https://example.org/a?b=c",
]


def charsmap_rules(blob):
    """Every (source, target) pair held in a precompiled charsmap: a walk of
    its double-array trie (the format spm_precompiled documents)."""
    size = int.from_bytes(blob[:4], "little")
    units = [int.from_bytes(blob[4 + 4 * i:8 + 4 * i], "little") for i in range(size // 4)]
    strings = blob[4 + size:]
    offset = lambda u: (u >> 10) << ((u & (1 << 9)) >> 6)
    label = lambda u: u & ((1 << 31) | 0xFF)
    rules = []

    def walk(pos, key):
        for c in range(1, 256):
            p = pos ^ c
            if p >= len(units) or label(units[p]) != c:
                continue
            nxt = p ^ offset(units[p])
            k = key + bytes([c])
            if (units[p] >> 8) & 1:
                v = units[nxt] & ((1 << 31) - 1)
                end = strings.index(b"\0", v)
                rules.append((k.decode("utf-8"), strings[v:end].decode("utf-8")))
            walk(nxt, k)

    walk(offset(units[0]), b"")
    return rules


KEEP = [(0x0000, 0x07FF), (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x1100, 0x11FF), (0x1E00, 0x1FFF),
        (0x2000, 0x215F), (0x2160, 0x218F), (0x2460, 0x24FF), (0x3000, 0x30FF), (0x3131, 0x318F),
        (0x3300, 0x33FF), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF)]


HANGUL = [(0x1100, 0x11FF), (0x3100, 0x32FF), (0xFF00, 0xFFEF)]


def kept(source):
    # Hangul's jamo-sequence rules are most of the map: only those starting
    # with two of the leading consonants the cases use are kept.
    first = ord(source[0])
    if len(source) > 2 and any(lo <= first <= hi for lo, hi in HANGUL) and first not in (0x1100, 0x1112):
        return False
    return any(lo <= first <= hi for lo, hi in KEEP)


def train(workdir, rule_tsv=None):
    prefix = f"{workdir}/m{'_sub' if rule_tsv else ''}"
    text = pathlib.Path(workdir) / "corpus.txt"
    text.write_text("\n".join(CORPUS * 3) + "\n", encoding="utf-8")
    extra = {"normalization_rule_tsv": rule_tsv} if rule_tsv else {"normalization_rule_name": "nmt_nfkc"}
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=prefix, model_type="unigram", vocab_size=700,
                                   hard_vocab_limit=False, character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0,
                                   pad_id=-1, minloglevel=2, **extra)
    m = pb.ModelProto()
    m.ParseFromString(pathlib.Path(prefix + ".model").read_bytes())
    return m


def build(m):
    # fairseq's ids, as XLMRobertaConverter writes them: its four specials,
    # the SentencePiece pieces after SentencePiece's own three, then <mask>.
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in m.pieces[3:]]
    vocab += [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(m.normalizer_spec.precompiled_charsmap),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<s>", "<pad>", "</s>", "<unk>")])
    tok.add_special_tokens([AddedToken("<mask>", special=True, normalized=False, lstrip=True)])
    return tok


def texts():
    t = list(CORPUS)
    t += ["", " ", "  ", "\t", "\n", "  two  spaces ", "lead", " lead", "   three lead", "trail   ", "a\u00a0b",
          "a\u3000b", "a\u2003\u2003b", "tab\tsep\tand\nnewline\r\ncrlf\rcr", "x \t y\n\n z", "one  two   three    four"]
    # Composed and decomposed accents, stacked combining marks.
    for s in ["naïve café résumé", "Ångström Øre", "Tiếng Việt có dấu", "Zoë Brontë", "ḍḥṣ ṭẓ", "Ǆemal ǈ ǋ"]:
        t += [s, unicodedata.normalize("NFD", s)]
    t += ["e\u0301", "a\u0308\u0301", "o\u0323\u0302", "i\u0307", "x\u0301\u0302\u0303\u0304", "\u0301alone",
          "ЙйЁё Й", "\u0438\u0306", "A\u030a", "\u212b", "\u2126 \u212a"]
    # Full-width and half-width forms, ligatures, compatibility characters.
    t += ["ＡＢＣ ａｂｃ １２３ ！？", "Ｈｅｌｌｏ，　ｗｏｒｌｄ！", "ｶﾀｶﾅ ﾊﾟﾋﾟ", "ﬁnd ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ", "① ② ⑳ ⒜ ⓐ",
          "x² y³ H₂O", "Ⅻ ⅻ ½ ¼ ⅞", "㍿ ㌔ ㎏ ㏄", "𝔾𝕠𝕠𝕕 𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄", "…‥ ‼ ⁇", "“quoted” ‘single’ «guillemets»",
          "a\u2013b\u2014c", "ﾞ ﾟ", "\ufb01\u0301", "Ａ\u0301", "ｅ\u0301"]
    # Control and invisible characters.
    t += ["a\x01b", "\x7f", "bell\x07", "esc\x1b[0m", "zero\u200bwidth", "zw\u200dj", "zw\u200cnj", "\ufeffbom",
          "soft\u00adhyphen", "rtl\u200fmark", "\x0b\x0c", "\u0085next", "nul\x00byte", "\u2028line\u2029para"]
    # Emoji: modifiers, ZWJ sequences, flags, keycaps, variation selectors.
    t += ["emoji 🙂 and 中文 text", "👍🏽 👩‍👩‍👧‍👦", "🇫🇷🇩🇪 flags", "1️⃣ #️⃣", "❤️ ☺️ ☺", "©\u200d🙂", "🧑🏿‍🚀",
          "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F"]
    # CJK, Hangul (precomposed and conjoining jamo), other scripts.
    t += ["北京欢迎你", "日本語の文章です。", "ｷｬｯﾁ", "한국어 문장", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
          "مَرْحَبًا", "שָׁלוֹם", "ड़ी दुख", "क्षत्रिय", "เขาไม่ได้พูดสักคำ", "ﻻ ﷺ", "Ελληνικά ΐ ΰ"]
    # Special tokens in the text, unknown characters.
    t += ["<s>hello</s> world", "x</s>y", "<unk> <pad>", "snow ☃ man ☃☃ run", "\U00010348 gothic", "ⓧ⁂⌘"]
    # <mask> takes the whitespace before it (lstrip), as in XLM-R.
    t += ["Paris is the <mask> of France.", "a   <mask>b", "<mask>", " <mask> ", "x\u3000<mask>\t<mask>y", "<mask>  z"]
    rng = random.Random(28)
    pool = list("abcxyz ABC  \t\n.,!?-'\"0123") + list("éèüößçñåøæœ") + ["e\u0301", "a\u0308", "\u0301", "\u0323"] + \
        list("ＡＺａｚ０９！　ｶﾞﾊﾟ") + list("ﬁﬂ①²Ⅻ㍿𝔾") + list("\x01\x1f\u200b\u200d\ufeff\u00a0\u2003\u3000") + \
        list("🙂👍🏽❤\ufe0f🇫🇷") + list("北京日本語한국\u1100\u1161\u11a8") + list("مَحבּदुख्เข่")
    for _ in range(220):
        t.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 24))))
    return t


def main():
    with tempfile.TemporaryDirectory() as work:
        full = train(work)
        rules = [r for r in charsmap_rules(full.normalizer_spec.precompiled_charsmap) if kept(r[0])]
        tsv = pathlib.Path(work) / "rules.tsv"
        hexes = lambda s: " ".join(f"{ord(c):X}" for c in s)
        tsv.write_text("".join(f"{hexes(s)}\t{hexes(d)}\n" for s, d in rules), encoding="utf-8")
        model = train(work, str(tsv))
    tok = build(model)
    OUT.mkdir(parents=True, exist_ok=True)
    tok.save(str(OUT / "tokenizer.json"))
    tok = Tokenizer.from_file(str(OUT / "tokenizer.json"))
    ts = texts()
    cases = {"texts": ts, "normalized": [tok.normalizer.normalize_str(s) for s in ts],
             "singles": [tok.encode(s).ids for s in ts], "pairs": [], "truncated": []}
    rng = random.Random(7)
    pairs = [(2, 3), (0, len(ts) - 1), (5, 5)] + [(rng.randrange(len(ts)), rng.randrange(len(ts))) for _ in range(40)]
    for q, d in pairs:
        cases["pairs"].append([q, d, 0, tok.encode(ts[q], ts[d]).ids])
    for length in [5, 9, 16]:
        tok.enable_truncation(max_length=length, strategy="longest_first")
        for q, d in pairs[:20]:
            cases["pairs"].append([q, d, length, tok.encode(ts[q], ts[d]).ids])
        for i in range(0, len(ts), 7):
            cases["truncated"].append([i, length, tok.encode(ts[i]).ids])
    tok.no_truncation()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), tok.pre_tokenizer])
    cases["singles_whitespace_split"] = [tok.encode(s).ids for s in ts]
    with open(OUT / "cases.json", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(rules)} normalisation rules, {tok.get_vocab_size()} pieces, {len(ts)} texts, "
          f"{(OUT / 'tokenizer.json').stat().st_size} bytes of tokenizer.json")


if __name__ == "__main__":
    main()
