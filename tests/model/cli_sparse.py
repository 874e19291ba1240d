"""tests/model/cli_sparse.py BIN — `modattn embed --sparse` against sentence-transformers' SparseEncoder
goldens (tests/fixtures/sparse_golden.json, .models/splade-tiny):
  - every text's {token_id: weight}: the golden's ids, weights within 1e-5 relative + 5e-6 absolute
    (the fp32 spread test_sparse documents), the same from arguments and from stdin (--jsonl);
  - --sparse-tokens names each id by its token in tokenizer.json; --top-k N keeps the N largest;
    --threshold X drops the weights below X;
  - refusals: a model without an MLM head (exit 1, naming what is missing); the usage errors (exit
    2): --sparse without --model, --top-k without --sparse, --threshold -1, --top-k 0,
    --dimensions with --sparse."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = sys.argv[1]
MODEL = os.path.join(REPO, ".models/splade-tiny")
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(*args, stdin=None):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, input=stdin)
    return r.returncode, r.stdout, r.stderr


def close(got, want):
    return abs(got - want) <= 1e-5 * abs(want) + 5e-6


def main():
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("cli_sparse: not available here: .models/splade-tiny missing (run `make model`)")
        return 77
    gold = json.load(open(os.path.join(REPO, "tests/fixtures/sparse_golden.json"), encoding="utf-8"))
    texts = [r["text"] for r in gold["rows"]]
    rc, out, err = run("embed", "--sparse", "--model", MODEL, *texts)
    check(rc == 0, f"embed --sparse: rc {rc}: {err}")
    lines = [json.loads(x) for x in out.splitlines()]
    check(len(lines) == len(texts), f"{len(lines)} lines for {len(texts)} texts")
    for i, (line, row) in enumerate(zip(lines, gold["rows"])):
        got, want = line["sparse"], row["weights"]
        check(line["index"] == i, f"text {i}: index {line['index']}")
        check(set(got) == set(want), f"text {i}: ids differ from sentence-transformers' ({len(got)} vs {len(want)})")
        bad = [k for k in got if k in want and not close(got[k], want[k])]
        check(not bad, f"text {i}: weights off for ids {bad[:5]}")
        check([int(k) for k in got] == sorted(int(k) for k in got), f"text {i}: ids not ascending")
    check(lines[-1]["tokens"] == 512, "the long text is cut to 512 tokens")
    # stdin, JSON lines: the same output
    rc, out2, err = run("embed", "--sparse", "--model", MODEL, "--jsonl", "-",
                        stdin="".join(json.dumps(t) + "\n" for t in texts))
    check(rc == 0 and out2 == out, f"stdin --jsonl differs from arguments (rc {rc}: {err})")
    # token strings
    vocab = json.load(open(os.path.join(MODEL, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
    by_id = {v: k for k, v in vocab.items()}
    rc, out, err = run("embed", "--sparse", "--sparse-tokens", "--top-k", "3", "--model", MODEL, texts[0])
    line = json.loads(out)
    check(rc == 0 and len(line["sparse"]) == 3, f"--top-k 3: {out} {err}")
    top3 = sorted(gold["rows"][0]["weights"].items(), key=lambda kv: -kv[1])[:3]
    check(set(line["sparse"]) == {k for k, _ in top3}, f"--top-k 3 kept {sorted(line['sparse'])}, want {top3}")
    check(line.get("sparse_tokens") == {k: by_id[int(k)] for k in line["sparse"]},
          f"--sparse-tokens: {line.get('sparse_tokens')}")
    check({"who", "makes", "honey"} <= set(line["sparse_tokens"].values()), "the query's own words weigh most")
    rc, out, err = run("embed", "--sparse", "--threshold", "1.0", "--model", MODEL, texts[1])
    got = json.loads(out)["sparse"]
    want = {k for k, v in gold["rows"][1]["weights"].items() if v >= 1.0}
    check(rc == 0 and set(got) == want and "sparse_tokens" not in json.loads(out),
          f"--threshold 1.0 kept {sorted(got)}, want {sorted(want)}")
    # refusals
    rc, out, err = run("embed", "--sparse", "--model", os.path.join(REPO, ".models/tiny-bert-cls"), "x")
    check(rc == 1 and "ForMaskedLM" in err and out == "", f"a model without an MLM head: rc {rc}, {err}")
    for args, needle in ((["--sparse", "x"], "needs --model"),
                         (["--top-k", "3", "x"], "applies to --sparse"),
                         (["--sparse-tokens", "x"], "applies to --sparse"),
                         (["--sparse", "--model", MODEL, "--threshold", "-1", "x"], "--threshold"),
                         (["--sparse", "--model", MODEL, "--top-k", "0", "x"], "--top-k"),
                         (["--sparse", "--model", MODEL, "--dimensions", "8", "x"], "do not apply")):
        rc, out, err = run("embed", *args)
        check(rc == 2 and needle in err and out == "", f"embed {' '.join(args)}: rc {rc} (want 2), {err.strip()}")
    rc, out, err = run("embed", "--help")
    check(rc == 0 and all(o in out for o in ("--sparse", "--sparse-tokens", "--top-k", "--threshold")),
          "--help lists the sparse options")
    print(f"cli_sparse: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
