"""Store.search with mode="sparse" (sparse=SparseEncoder) on a store made by `modattn index --sparse`,
hybrid fusing the sparse ranking, and Store.search(rerank=..., rerank_top=...): each the same results
as the CLI's `search --mode sparse` / `search --rerank DIR --rerank-top N` (paths, ranks, scores,
found_by, first-stage rank and score); and the refusals."""
import json
import subprocess

import pytest

from conftest import MODELS

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
