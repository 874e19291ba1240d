#!/usr/bin/env python3
"""Write a small multilingual SentencePiece Unigram tokenizer as tokenizer.json, converted the way
`transformers` converts XLM-RoBERTa's (so it carries a real `Precompiled` charsmap, nmt_nfkc).

    python3 tools/make_unigram_tokenizer.py

Writes
  tests/fixtures/tokenizer_unigram.json        vocab 1500, nmt_nfkc, XLM-R specials and template
  tests/fixtures/tokenizer_unigram_bytes.json  the same corpus with byte_fallback (<0x00>..<0xFF>) and
                                               the identity rule (no charsmap: Strip + Replace only)
The nmt_nfkc charsmap alone is about 330 KB of base64, as in every XLM-R tokenizer.json.

Needs: pip install sentencepiece transformers tokenizers protobuf (no torch). CI does not run this;
the C tests read the committed files. The corpus is written here, in many scripts, on purpose.
"""
import json
import os
import sys
import tempfile

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")

CORPUS = """\
The quick brown fox jumps over the lazy dog. Search engines find documents by meaning, not only by words.
A document engine indexes text, splits it into chunks and embeds every chunk into a dense vector.
Sentence embeddings map sentences to vectors; similar sentences have similar vectors.
O rápido cachorro marrom pula sobre a raposa preguiçosa. Em São Paulo, a informação está em português.
Nós procuramos documentos pelo significado, não apenas pelas palavras. Ação, coração, edição, atenção.
Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Mädchen, Übersetzung, Bücher.
Die Suchmaschine findet Dokumente nach ihrer Bedeutung. Wir möchten heute Abend in München essen.
Le renard brun rapide saute par-dessus le chien paresseux. Où est la bibliothèque? C'est très élégant.
Nous cherchons des documents par leur sens, pas seulement par leurs mots. Français, garçon, être, naïf.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир! Поиск документов по смыслу.
Мы ищем документы по их значению, а не только по словам. Ёлка, ёжик, щука, объявление, Россия.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم! نبحث عن المستندات حسب المعنى.
اللغة العربية جميلة، والكتابة من اليمين إلى اليسار. ٠١٢٣٤٥٦٧٨٩ ، ؛ ؟
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया! हम अर्थ के अनुसार दस्तावेज़ खोजते हैं।
हिन्दी भाषा में परीक्षण। भारत एक विशाल देश है।
敏捷的棕色狐狸跳过了懒狗。我爱北京天安门。我们按照意义而不是词语来搜索文档。中文分词测试。
日本語のテキストです。カタカナとひらがな。東京は日本の首都です。素早い茶色の狐が怠惰な犬を飛び越える。
ｶﾀｶﾅ 半角 ＡＢＣ 全角 １２３ テスト。
한국어 텍스트입니다. 안녕하세요! 빠른 갈색 여우가 게으른 개를 뛰어넘습니다. 의미로 문서를 찾습니다.
Emoji: 😀 😃 😄 👍 👍🏽 ❤️ 🇫🇷 🇩🇪 🎉 🚀 family 👨‍👩‍👧‍👦 and flags.
Mixed scripts: Berlin Берлин برلين बर्लिन 柏林 ベルリン 베를린 — 2024-01-15, 3.14, 100%, $42, €7.
Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024. Code: def f(x): return x ** 2 + 1 # square.
https://www.example.com/path?query=1&b=two contact: john.doe@example.com
Ελληνικά: Γειά σου Κόσμε! Tiếng Việt có dấu: Hà Nội. שלום עולם. สวัสดีครับ ภาษาไทย.
ﬁnance ﬂow oﬃce ① ② Ⅷ ㍱ ™ ½ ¼ x² H₂O ℃ № ㈱
"""


def corpus_lines():
    lines = [l for l in CORPUS.splitlines() if l.strip()]
    # each sentence also alone, lower and upper cased, so pieces have counts to compete with
    out = []
    for rep in range(3):
        for l in lines:
            out.append(l)
            out.append(l.lower())
            for s in l.replace("!", ".").replace("?", ".").replace("。", ".").split("."):
                if s.strip():
                    out.append(s.strip())
    return out


def train(prefix, byte_fallback, rule):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(corpus_lines()) + "\n")
        name = f.name
    spm.SentencePieceTrainer.train(
        input=name, model_prefix=prefix, model_type="unigram", vocab_size=1500, hard_vocab_limit=False,
        normalization_rule_name=rule, character_coverage=1.0, byte_fallback=byte_fallback,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)  # XLM-R's sentencepiece ids
    os.unlink(name)
    return prefix + ".model"


def convert(model_file, out, byte_fallback):
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    class Original:  # what the converter reads of XLMRobertaTokenizer (the slow one)
        vocab_file = model_file
        ids = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}

        def convert_tokens_to_ids(self, tok):
            return self.ids[tok]

    class Converter(XLMRobertaConverter):
        handle_byte_fallback = byte_fallback

    tk = Converter(Original()).converted()
    # XLMRobertaTokenizerFast's own specials: <unk> and <mask> (lstrip, as XLM-R's mask token)
    mask_id = tk.get_vocab_size() - 1
    assert tk.id_to_token(mask_id) == "<mask>"
    tk.add_special_tokens([AddedToken("<unk>", normalized=False, special=True),
                           AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    j = json.loads(tk.to_str())
    j["truncation"] = None
    j["padding"] = None
    with open(out, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    print("wrote %s (%d bytes, vocab %d)" % (os.path.relpath(out, ROOT), os.path.getsize(out),
                                              len(j["model"]["vocab"])))


def main():
    with tempfile.TemporaryDirectory() as d:
        convert(train(os.path.join(d, "plain"), False, "nmt_nfkc"), os.path.join(OUT, "tokenizer_unigram.json"), False)
        convert(train(os.path.join(d, "bytes"), True, "identity"), os.path.join(OUT, "tokenizer_unigram_bytes.json"), True)


if __name__ == "__main__":
    sys.exit(main())
