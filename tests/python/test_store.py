"""modattn.Store: index a folder of text files, search it, and refuse a model it was not made with."""

import os

import pytest

from conftest import TINY

DOCS = {
    "bees.txt": "Honey bees collect nectar from flowers and turn it into honey inside the hive.\n"
                "The queen lays the eggs; worker bees build the wax comb and feed the larvae.\n",
    "volcano.md": "# Volcanoes\n\nA volcano erupts when magma rises through the crust. Lava flows and ash clouds "
                  "follow the eruption; Mount Etna is one of the most active volcanoes in Europe.\n",
    "compiler.txt": "A compiler translates source code into machine code. The parser builds a syntax tree, "
                    "then the optimizer and the code generator emit instructions.\nError E4021 means the "
                    "linker found no entry point.\n",
    "sub/bread.txt": "To bake bread, knead flour, water, yeast and salt, let the dough rise, then bake it in a "
                     "hot oven until the crust is brown.\n",
}


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    for name, text in DOCS.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (root / "image.bin").write_bytes(bytes(range(256)) * 8)  # binary: skipped
    return root


def test_default_k(modattn, model, tmp_path):
    """k's default is 10 on every surface (`modattn search`, the server's "k", here): 12 chunks, 10 back."""
    root = tmp_path / "twelve"
    root.mkdir()
    for i in range(12):
        (root / f"note{i:02d}.txt").write_text(f"Note {i}: bees and honey, item number {i}.\n", encoding="utf-8")
    with modattn.Store(tmp_path / "twelve.db", model) as s:
        assert s.index([root], progress=False)["chunks"] == 12
        assert len(s.search("honey")) == 10
        assert len(s.search("honey", k=12)) == 12


def test_index_and_search(modattn, model, corpus, tmp_path):
    db = tmp_path / "store.db"
    with modattn.Store(db, model) as s:
        r = s.index([corpus], progress=False)
        assert r["files_indexed"] == 4 and r["files_failed"] == 0 and r["errors"] == []
        assert r["files_skipped"] == 1 and r["skipped"][0][0].endswith("image.bin")
        assert r["chunks"] >= 4 and r["tokens"] > 0 and r["vector_file"] in ("written", "appended")
        assert s.counts() == {"documents": 4, "chunks": r["chunks"], "embeddings": r["chunks"], "sparse_rows": 0,
                            "sparse_chunks": 0}

        hits = s.search("who makes honey", k=3)
        assert hits and os.path.basename(hits[0]["path"]) == "bees.txt", [h["path"] for h in hits]
        h = hits[0]
        assert h["rank"] == 1 and h["line"] == 1 and h["page"] == 0 and h["kind"] == "text"
        assert h["start"] >= 0 and h["end"] > h["start"] and "Honey bees" in h["text"]
        assert (h["start_byte"], h["end_byte"]) == (h["start"], h["end"])  # the older names, kept
        assert h["cosine"] is not None and 0 < h["cosine"] <= 1.0001
        # one name on every surface (docs/FIELDS.md): found_by, as the CLI's and the server's
        assert all(x["found_by"] == ("both" if x["vector_rank"] and x["keyword_rank"] else
                                     "words" if x["keyword_rank"] else "meaning") for x in hits), hits

        by_meaning = s.search("an eruption of lava", k=2, mode="vector")
        assert os.path.basename(by_meaning[0]["path"]) == "volcano.md" and by_meaning[0]["keyword_rank"] is None
        by_words = s.search("E4021", mode="keyword")
        assert len(by_words) == 1 and os.path.basename(by_words[0]["path"]) == "compiler.txt"
        t = by_words[0]["text"]
        assert any(t.encode()[a:b] == b"E4021" for a, b in by_words[0]["highlights"])
        assert by_words[0]["found_by"] == "words" and by_meaning[0]["found_by"] == "meaning"
        under = s.search("baking", k=5, path_prefix=str(corpus / "sub"))
        assert [os.path.basename(x["path"]) for x in under] == ["bread.txt"]
        with pytest.raises(ValueError, match="mode="):
            s.search("x", mode="fuzzy")
        # one rule for what a text is, as Model.encode: bytes and bytearray are UTF-8 queries
        as_str = s.search("who makes honey", k=3)
        for q in (b"who makes honey", bytearray(b"who makes honey")):
            assert [(x["path"], x["score"]) for x in s.search(q, k=3)] == [(x["path"], x["score"]) for x in as_str]
        with pytest.raises(TypeError, match=r"query is int: a text is a str, bytes or bytearray"):
            s.search(42)
        with pytest.raises(ValueError, match="NUL"):
            s.search(b"honey\x00bees")

        again = s.index(corpus, progress=False)  # unchanged: nothing embedded
        assert again["files_indexed"] == 0 and again["files_unchanged"] == 4 and again["chunks"] == 0

        # the Store holds its vectors between searches: a document indexed since is found
        (corpus / "comet.txt").write_text("A comet's tail of ice and dust points away from the sun.\n", encoding="utf-8")
        assert s.index(corpus, progress=False)["files_indexed"] == 1
        found = s.search("the tail of a comet", k=1, mode="vector")
        assert os.path.basename(found[0]["path"]) == "comet.txt", found
        (corpus / "comet.txt").unlink()
        assert s.index(corpus, prune=True, progress=False)["files_pruned"] == 1
        gone = s.search("the tail of a comet", k=5, mode="vector")
        assert all(os.path.basename(h["path"]) != "comet.txt" for h in gone), [h["path"] for h in gone]
    assert s.closed
    with pytest.raises(ValueError, match="closed"):
        s.search("honey")
    s.close()  # again: fine

    # read-only, as a searcher
    ro = modattn.Store(str(db), model, readonly=True)
    assert os.path.basename(ro.search("bread in the oven", k=1)[0]["path"]) == "bread.txt"
    ro.close()


VILLAGE = ("The village sits in a valley between two rivers, and most of its houses are built from grey stone "
           "quarried nearby. Every spring the meadows flood, and the farmers move their sheep to the higher "
           "pastures for a few weeks. The church tower was rebuilt after a storm in the last century and its bell "
           "can be heard from the next town. The baker closes his shop at noon on Saturdays and Sundays, once the "
           "last loaves have been sold. A narrow road climbs from the square to the old mill, where the water wheel "
           "still turns for visitors. In the autumn the orchards are heavy with apples, and children are paid a "
           "few coins to gather them. The school has three classrooms and a small library that opens in the "
           "evenings twice a week.\n")


def test_snippet_by_meaning(modattn, model, tmp_path):
    """A chunk found by meaning alone: its snippet is the sentence that answers, not the chunk's start (the
    library's choice, pipeline/snippet.c, as the CLI's and the server's "snippet")."""
    root = tmp_path / "village"
    root.mkdir()
    (root / "village.txt").write_text(VILLAGE, encoding="utf-8")
    (root / "volcano.txt").write_text("Lava flows from the volcano after the eruption.\n", encoding="utf-8")
    with modattn.Store(tmp_path / "village.db", model) as s:
        s.index([root], progress=False)
        hit = s.search("where to find fresh bread at the weekend", k=2)[0]
        assert hit["path"].endswith("village.txt") and hit["found_by"] == "meaning" and hit["highlights"] == []
        a, b = hit["snippet"]
        t = hit["text"].encode()
        assert a == t.index(b"The baker closes") and 0 < b - a <= 243, (a, b)
        # a short chunk: the whole of it
        lava = s.search("lava", k=2, mode="vector")[0]
        assert lava["path"].endswith("volcano.txt") and lava["snippet"] == (0, len(lava["text"].encode()))


def test_empty_and_missing(modattn, model, tmp_path):
    with modattn.Store(tmp_path / "new.db", model) as s:
        assert s.search("anything") == []
    with pytest.raises(FileNotFoundError, match="no-such.db"):
        modattn.Store(tmp_path / "no-such.db", model, readonly=True)
    with pytest.raises(TypeError, match="modattn.Model"):
        modattn.Store(tmp_path / "x.db", "not a model")


def test_store_of_another_model(modattn, model, corpus, tmp_path):
    if not (TINY / "modules.json").is_file():
        pytest.skip(f"no second model at {TINY} (make model puts tiny-bert-cls there)")
    db = tmp_path / "minilm.db"
    with modattn.Store(db, model) as s:
        s.index(corpus / "bees.txt", progress=False)
    other = modattn.Model(TINY, threads=1)
    with pytest.raises(modattn.ModelMismatchError) as ei:
        modattn.Store(db, other)
    msg = str(ei.value)
    assert "all-MiniLM-L6-v2" in msg and "tiny-bert-cls" in msg, msg


def test_index_html_pdf_limits_and_hard_links(modattn, model, tmp_path):
    """HTML and PDF text is extracted in a child process (fork) from Python too: the same text as
    before, a file past file_timeout in errors while the rest is indexed, and a hard link added
    after the first index is the stored document, not a second one."""
    import subprocess
    import sys
    gen = os.path.join(os.path.dirname(__file__), "..", "pipeline", "hostile_files.py")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "b.html").write_text("<html><body><h1>Rivers</h1><p>The river floods the valley &amp; every "
                                 "spring.</p></body></html>", encoding="utf-8")
    subprocess.run([sys.executable, gen, "pdf", str(root / "c.pdf"), "volcanoes erupt lava and ash"], check=True)
    subprocess.run([sys.executable, gen, "attrs", str(root / "a.html"), "300000"], check=True)
    with pytest.raises(ValueError, match="file_timeout"):
        modattn.Store(tmp_path / "x.db", model).index(root, file_timeout=-1)
    with modattn.Store(tmp_path / "s.db", model) as s:
        r = s.index(root, progress=False, file_timeout=1.5)
        assert r["files_indexed"] == 2 and r["files_failed"] == 1 and r["interrupted"] is False, r
        assert r["errors"][0][0].endswith("a.html") and "took longer than --file-timeout 1.5 s" in r["errors"][0][1]
        hits = {os.path.basename(h["path"]): h for h in s.search("river valley volcano lava", k=5)}
        assert hits["b.html"]["text"] == "Rivers\n\nThe river floods the valley & every spring."
        assert hits["c.pdf"]["text"] == "volcanoes erupt lava and ash" and hits["c.pdf"]["page"] == 1
        (root / "a.html").unlink()
        os.link(root / "b.html", root / "0-link.html")  # sorts before the stored name
        again = s.index(root, progress=False, prune=True)
        assert again["files_indexed"] == 0 and again["files_unchanged"] == 2, again
        assert s.counts()["documents"] == 2


def test_index_chunk_tokens_and_max_file_size(modattn, model, tmp_path):
    """Store.index(chunk_tokens=, max_file_size=): chunks of at most chunk_tokens tokens (more of them
    than the model's 256), a file over max_file_size skipped with the cap named, a bad value refused."""
    import sqlite3
    root = tmp_path / "docs"
    root.mkdir()
    words = " ".join(f"the river number {i} flows past the old mill and the stone bridge." for i in range(60))
    (root / "long.txt").write_text(words + "\n", encoding="utf-8")
    (root / "big.txt").write_text("bees " * 2000 + "\n", encoding="utf-8")  # 10001 bytes
    default_db, small_db = tmp_path / "default.db", tmp_path / "small.db"
    with modattn.Store(default_db, model) as s:
        r0 = s.index(root, progress=False)
    assert r0["files_indexed"] == 2 and r0["files_skipped"] == 0, r0
    with modattn.Store(small_db, model) as s:
        with pytest.raises(ValueError, match="chunk_tokens=-1"):
            s.index(root, progress=False, chunk_tokens=-1)
        r = s.index(root, progress=False, chunk_tokens=32, max_file_size=5000)
    assert r["files_indexed"] == 1 and r["files_skipped"] == 1, r
    path, why = r["skipped"][0]
    assert path.endswith("big.txt") and "10001 bytes" in why and "5000" in why, r["skipped"]

    def chunks(db):
        c = sqlite3.connect(db)
        rows = c.execute("select c.ntokens, d.chunk_tokens from chunks c join documents d on d.id = c.document "
                         "where d.path like '%long.txt'").fetchall()
        c.close()
        return rows
    small, default = chunks(small_db), chunks(default_db)
    assert small and all(n <= 32 and ct == 32 for n, ct in small), small
    assert len(small) > 2 * len(default) >= 2, (len(small), len(default))
    assert any(n > 32 for n, _ in default), default  # the default chunks are longer: the option did it
