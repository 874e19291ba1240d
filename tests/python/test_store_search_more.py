"""Store.search with mode="sparse" (sparse=SparseEncoder) on a store made by `modattn index --sparse`,
hybrid fusing the sparse ranking, and Store.search(rerank=..., rerank_top=...): each the same results
as the CLI's `search --mode sparse` / `search --rerank DIR --rerank-top N` (paths, ranks, scores,
found_by, first-stage rank and score); Store.index(sparse=DIR) as `modattn index --sparse DIR`
(sparse rows for every chunk, the recorded model reused, counts() and sparse_model()); and the
refusals."""
import json
import os
import subprocess

import pytest

from conftest import MODELS, TINY

SP = MODELS / "splade-tiny"
CE = MODELS / "tiny-cross-encoder"
DOCS = {
    "a.txt": "The lighthouse keeper climbed the spiral stairs every evening to light the great lamp.",
    "b.txt": "Sourdough bread needs a starter of flour and water, fed daily, and a long slow rise.",
    "c.txt": "A comet's tail always points away from the sun, pushed by the solar wind.",
    "d.txt": "Glaciers carve valleys into a U shape as they creep downhill over thousands of years.",
    "e.txt": "The violinist tuned her instrument before the concert; the orchestra waited in silence.",
    "f.txt": "The tax form asks for your income, deductions and the refund you expect to receive.",
}


@pytest.fixture(scope="module")
def sparse_db(tmp_path_factory, cli, minilm_path):
    for p in (SP, CE):
        if not (p / "model.safetensors").is_file():
            pytest.fail(f"{p} is missing: run `make model` first")
    d = tmp_path_factory.mktemp("sparse")
    (d / "docs").mkdir()
    for name, text in DOCS.items():
        (d / "docs" / name).write_text(text + "\n")
    db = d / "s.db"
    subprocess.run([str(cli), "index", "--quiet", "--model", str(minilm_path), "--sparse", str(SP), "--db", str(db),
                    str(d / "docs")], check=True)
    return db


def cli_json(cli, *args):
    out = subprocess.run([str(cli), "search", "--json", *map(str, args)], check=True, capture_output=True).stdout
    j = json.loads(out)
    return j["results"] if isinstance(j, dict) else j


def test_sparse_mode_same_as_cli(modattn, model, cli, sparse_db):
    sp = modattn.SparseEncoder(str(SP))
    with modattn.Store(str(sparse_db), model) as s:
        got = s.search("lighthouse lamp", k=4, mode="sparse", sparse=sp)
        want = cli_json(cli, "--db", sparse_db, "--mode", "sparse", "-k", 4, "lighthouse lamp")
        assert [h["path"] for h in got] == [w["path"] for w in want]
        assert got[0]["path"].endswith("a.txt")
        for h, w in zip(got, want):
            assert h["found_by"] == "sparse" == w["found_by"]
            assert h["sparse_rank"] == h["rank"]
            assert abs(h["sparse_score"] - w["sparse_score"]) <= 1e-6 * abs(w["sparse_score"])
        hy = s.search("comet tail", k=3, sparse=sp)
        want = cli_json(cli, "--db", sparse_db, "-k", 3, "comet tail")
        assert [h["path"] for h in hy] == [w["path"] for w in want]
        assert [h["found_by"] for h in hy] == [w["found_by"] for w in want]
        assert "sparse" in hy[0]["found_by"] and hy[0]["path"].endswith("c.txt")
        # without sparse=: meaning and words only, as before
        plain = s.search("comet tail", k=3)
        assert all(h["sparse_rank"] is None and "sparse" not in h["found_by"] for h in plain)


def test_sparse_refusals(modattn, model, sparse_db, tmp_path, cli, minilm_path):
    with modattn.Store(str(sparse_db), model) as s:
        with pytest.raises(modattn.InvalidArgumentError, match="SparseEncoder"):
            s.search("lamp", mode="sparse")
        with pytest.raises(TypeError, match="SparseEncoder"):
            s.search("lamp", mode="sparse", sparse="not an encoder")
        with pytest.raises(modattn.InvalidArgumentError, match="sparse_weight"):
            s.search("lamp", sparse_weight=-1.0)
    plain = tmp_path / "plain.db"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("a lamp\n")
    subprocess.run([str(cli), "index", "--quiet", "--model", str(minilm_path), "--db", str(plain),
                    str(tmp_path / "d")], check=True)
    with modattn.Store(str(plain), model) as s:
        with pytest.raises(modattn.UnsupportedError, match="index --sparse"):
            s.search("lamp", mode="sparse", sparse=modattn.SparseEncoder(str(SP)))


def test_rerank_same_as_cli(modattn, model, cli, sparse_db):
    with modattn.Store(str(sparse_db), model) as s:
        for k, top in ((3, 5), (6, 2)):
            got = s.search("who bakes bread", k=k, mode="vector", rerank=str(CE), rerank_top=top)
            want = cli_json(cli, "--db", sparse_db, "--mode", "vector", "-k", k, "--rerank", CE, "--rerank-top", top,
                            "who bakes bread")
            assert len(got) == len(want) == k
            assert [h["path"] for h in got] == [w["path"] for w in want]
            assert [h["rank"] for h in got] == list(range(1, k + 1))
            for h, w in zip(got, want):
                assert abs(h["score"] - w["score"]) <= 1e-6 * max(1.0, abs(w["score"]))
                assert h.get("first_stage_rank") == w.get("first_stage_rank")
        ce = modattn.CrossEncoder(str(CE))
        a = s.search("who bakes bread", k=3, rerank=ce, rerank_top=4)
        b = s.search("who bakes bread", k=3, rerank=str(CE), rerank_top=4)
        assert [(h["path"], h["score"]) for h in a] == [(h["path"], h["score"]) for h in b]
        with pytest.raises(ValueError, match="rerank_top"):
            s.search("x", rerank=ce, rerank_top=0)
        with pytest.raises(ValueError, match="one label"):
            s.search("x", rerank=str(MODELS / "tiny-cross-encoder-3"))


def test_index_sparse(modattn, model, cli, sparse_db, tmp_path):
    """Store.index(sparse=DIR) as `modattn index --sparse DIR`: every chunk gets its sparse rows (in
    its transaction), the store records the model (later calls without sparse= use it), and sparse
    search finds a document by its words with the scores of the CLI-made store."""
    import sqlite3

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n")
    db = tmp_path / "py.db"
    with modattn.Store(str(db), model) as s:
        assert s.sparse_model() is None
        assert s.counts()["sparse_rows"] == 0 == s.counts()["sparse_chunks"]
        r = s.index(docs, progress=False, sparse=SP)  # a PathLike, as the CLI's --sparse DIR
        c = s.counts()
        assert r["files_indexed"] == len(DOCS) and r["chunks"] == c["chunks"] > 0
        assert c["sparse_chunks"] == c["chunks"] and c["sparse_rows"] > 5 * c["chunks"]
        rec = s.sparse_model()
        assert rec["name"] == "splade-tiny" and len(rec["identity"]) == 16
        assert os.path.realpath(rec["dir"]) == os.path.realpath(SP)
        sp = modattn.SparseEncoder(str(SP))
        got = s.search("lighthouse lamp", k=4, mode="sparse", sparse=sp)
        assert got[0]["path"].endswith("a.txt") and got[0]["found_by"] == "sparse"
        # the CLI's store of the same documents: the same ranking and sparse scores
        with modattn.Store(str(sparse_db), model) as t:
            want = t.search("lighthouse lamp", k=4, mode="sparse", sparse=sp)
            assert rec == t.sparse_model()
        assert [os.path.basename(h["path"]) for h in got] == [os.path.basename(w["path"]) for w in want]
        assert [h["sparse_score"] for h in got] == [w["sparse_score"] for w in want]
        # a later call without sparse=: the recorded model keeps every new chunk's vector
        (docs / "g.txt").write_text("The beekeeper lifts a frame of honeycomb from the hive.\n")
        r2 = s.index(docs, progress=False)
        c2 = s.counts()
        assert r2["files_indexed"] == 1 and c2["sparse_chunks"] == c2["chunks"] == c["chunks"] + r2["chunks"]
        assert s.search("honeycomb hive", k=1, mode="sparse", sparse=sp)[0]["path"].endswith("g.txt")
    con = sqlite3.connect(db)
    try:
        orphans = con.execute("SELECT count(*) FROM sparse WHERE chunk NOT IN (SELECT id FROM chunks)").fetchone()[0]
        bare = con.execute("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk FROM sparse)").fetchone()[0]
    finally:
        con.close()
    assert orphans == 0 and bare == 0
    # the CLI searches the Python-made store the same
    cli_hits = cli_json(cli, "--db", db, "--mode", "sparse", "-k", 1, "honeycomb hive")
    assert cli_hits[0]["path"].endswith("g.txt")


def test_index_sparse_refusals(modattn, model, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "x.txt").write_text("a lamp\n")
    with modattn.Store(str(tmp_path / "a.db"), model) as s:
        for bad in (1, True, ["x"]):
            with pytest.raises(TypeError, match="SPLADE model's folder"):
                s.index(docs, progress=False, sparse=bad)
        with pytest.raises(modattn.UnsupportedError, match="ForMaskedLM"):
            s.index(docs, progress=False, sparse=TINY)  # no MLM head
        with pytest.raises(modattn.Error):
            s.index(docs, progress=False, sparse=tmp_path / "no-such-model")
        assert s.counts()["documents"] == 0  # nothing indexed by the refusals
        s.index(docs, progress=False)  # plain: no sparse vectors
        # chunks without sparse vectors: refused (sparse search would never find them)
        with pytest.raises(modattn.InvalidArgumentError, match="without sparse vectors"):
            s.index(docs, progress=False, sparse=SP)
        assert s.counts()["sparse_rows"] == 0 and s.sparse_model() is None
