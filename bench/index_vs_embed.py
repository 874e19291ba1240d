#!/usr/bin/env python3
"""bench/index_vs_embed.py [--build build] [--runs 3] [--out bench/results/index_vs_embed] — issue 40 item 6:
`modattn index` tokens/s against `modattn embed` tokens/s on the same text, in one run, per format.

Method. For each corpus (demo/corpus as it is, then the text of demo/corpus's .txt/.md files written in
each format the indexer reads, by hand as tests/pipeline/make_format_fixtures.py does: txt, md, html,
pdf, docx, odt, epub, rtf, eml, txt.gz), one row:
  - index: `modattn index --json --quiet` into a fresh store (wall time of the whole process, model
    load included; tokens = its tokens_embedded);
  - embed: the chunk texts of that store (`modattn export`, in chunk order) fed to
    `modattn embed --jsonl -` (wall time of the whole process, model load included; tokens = the sum
    of its "tokens"): the encoder on exactly the text index embedded, so the ceiling for index;
  - demo/corpus also runs index taking turns with the model (`--mem-budget 1024G`: with a memory budget
    the indexer waits for each batch, as every run did before the pipeline), the before figure.
Runs alternate (index, embed, index, embed, ...) so that others' load falls on both alike; medians of
--runs. CPU seconds (user+system of the process, from wait4) are reported too: on a shared machine
they are the figure least moved by other users. The load average and the CPU time others used during
the run (/proc/stat busy time less ours) are recorded: on this 2-CPU machine shared by several jobs
the wall-clock figures are under load; the ratio, measured in the same minutes, is what to read."""
import argparse, gzip, html, io, json, os, platform, resource, shutil, statistics, subprocess, sys, tempfile, time, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "pipeline"))
import hostile_files  # noqa: E402  (write_pdf: a PDF by hand)


def cpu_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v) - idle) / os.sysconf("SC_CLK_TCK")


def run(cmd, stdin=None, stdout=subprocess.PIPE):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 3):
        sys.exit("index_vs_embed: %s failed (%d): %s" % (" ".join(cmd), p.returncode, err.decode()[-2000:]))
    return out, wall


def run_timed(cmd, stdin_path=None):
    """(stdout, wall s, cpu s) of one process."""
    fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out, wall = run(cmd, stdin=fin)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if stdin_path:
        fin.close()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return out, wall, cpu


# ---- the corpora

def paragraphs(text):
    ps = [" ".join(p.split()) for p in text.replace("\r", "").split("\n\n")]
    return [p for p in ps if p]


def zwrite(path, members, first_stored=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        if first_stored:
            z.writestr(zipfile.ZipInfo(first_stored[0]), first_stored[1], compress_type=zipfile.ZIP_STORED)
        for n, data in members:
            z.writestr(n, data)


def x(s):
    return html.escape(s, quote=False)


def write_format(fmt, base, ps):
    if fmt == "txt":
        open(base + ".txt", "w").write("\n\n".join(ps) + "\n")
    elif fmt == "md":
        open(base + ".md", "w").write("# " + os.path.basename(base) + "\n\n" + "\n\n".join(ps) + "\n")
    elif fmt == "html":
        open(base + ".html", "w").write("<html><head><title>t</title></head><body>" +
                                        "".join("<p>%s</p>" % x(p) for p in ps) + "</body></html>")
    elif fmt == "pdf":
        # lines of at most 90 characters, 50 lines a page
        lines = []
        for p in ps:
            words, cur = p.split(), ""
            for w in words:
                if len(cur) + len(w) + 1 > 90:
                    lines.append(cur)
                    cur = w
                else:
                    cur = (cur + " " + w).strip()
            lines.append(cur)
            lines.append("")
        pages = []
        for i in range(0, len(lines), 50):
            body = b"BT /F1 10 Tf 40 760 Td 12 TL\n"
            for ln in lines[i:i + 50]:
                ln = ln.encode("latin-1", "replace").decode("latin-1")
                esc = ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
                body += b"(" + esc.encode("latin-1") + b") ' \n"
            pages.append([body + b"ET\n"])
        hostile_files.write_pdf(base + ".pdf", pages)
    elif fmt == "docx":
        W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
        body = "".join('<w:p><w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>' % x(p) for p in ps)
        zwrite(base + ".docx", [("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'),
                                ("_rels/.rels", "<Relationships/>"),
                                ("word/document.xml", '<?xml version="1.0" encoding="UTF-8"?><w:document %s><w:body>%s</w:body></w:document>' % (W, body))])
    elif fmt == "odt":
        OD = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
              'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"')
        body = "<office:text>" + "".join("<text:p>%s</text:p>" % x(p) for p in ps) + "</office:text>"
        content = '<?xml version="1.0" encoding="UTF-8"?><office:document-content %s><office:body>%s</office:body></office:document-content>' % (OD, body)
        zwrite(base + ".odt", [("META-INF/manifest.xml", "<manifest/>"), ("content.xml", content)],
               first_stored=("mimetype", "application/vnd.oasis.opendocument.text"))
    elif fmt == "epub":
        container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                     '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                     '</rootfiles></container>')
        opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest>'
               '<item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/></manifest>'
               '<spine><itemref idref="c1"/></spine></package>')
        ch = ('<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
              '<head><title>t</title></head><body>%s</body></html>' % "".join("<p>%s</p>" % x(p) for p in ps))
        zwrite(base + ".epub", [("META-INF/container.xml", container), ("OEBPS/content.opf", opf), ("OEBPS/ch1.xhtml", ch)],
               first_stored=("mimetype", "application/epub+zip"))
    elif fmt == "rtf":
        def rtf_esc(s):
            o = []
            for c in s:
                if c in "\\{}":
                    o.append("\\" + c)
                elif ord(c) < 128:
                    o.append(c)
                else:
                    o.append("\\u%d?" % (ord(c) if ord(c) < 32768 else ord(c) - 65536))
            return "".join(o)
        open(base + ".rtf", "w").write("{\\rtf1\\ansi{\\fonttbl{\\f0 Times;}}\\f0 " +
                                       "".join(rtf_esc(p) + "\\par\n" for p in ps) + "}")
    elif fmt == "eml":
        body = "\n\n".join(ps).encode("utf-8")
        import base64
        open(base + ".eml", "wb").write(b"From: a@example.org\nTo: b@example.org\nSubject: " +
                                        os.path.basename(base).encode() + b"\nMIME-Version: 1.0\n"
                                        b"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" +
                                        base64.encodebytes(body))
    elif fmt == "txt.gz":
        with gzip.open(base + ".txt.gz", "wb") as f:
            f.write(("\n\n".join(ps) + "\n").encode())
    else:
        raise ValueError(fmt)


FORMATS = ["txt", "md", "html", "pdf", "docx", "odt", "epub", "rtf", "eml", "txt.gz"]


def make_corpora(work, nfiles):
    src = sorted(f for f in os.listdir(os.path.join(ROOT, "demo/corpus")) if f.endswith((".txt", ".md")))
    # the first nfiles texts by name, spread over the names (a slice of each kind of text)
    step = max(1, len(src) // nfiles)
    pick = src[::step][:nfiles]
    texts = {f: paragraphs(open(os.path.join(ROOT, "demo/corpus", f), encoding="utf-8").read()) for f in pick}
    dirs = {}
    for fmt in FORMATS:
        d = os.path.join(work, "corpus-" + fmt.replace(".", "-"))
        os.makedirs(d)
        for f, ps in texts.items():
            write_format(fmt, os.path.join(d, os.path.splitext(f)[0]), ps)
        dirs[fmt] = d
    return dirs, pick


# ---- one row

def index_once(binp, model, corpus, db, extra=()):
    for sfx in ("", "-wal", "-shm", ".vec"):
        if os.path.exists(db + sfx):
            os.remove(db + sfx)
    out, wall, cpu = run_timed([binp, *extra, "index", "--json", "--quiet", "--model", model, "--db", db, corpus])
    j = json.loads(out)
    return {"wall": wall, "cpu": cpu, "tokens": j["tokens_embedded"], "chunks": j["chunks_embedded"],
            "documents": j["files_indexed"], "errors": j.get("files_skipped", 0), "index_seconds": j["seconds"]}


def chunk_texts(binp, db, path):
    out, _ = run([binp, "export", "--db", db, "--no-vectors"])
    with open(path, "w") as f:
        for line in out.decode().splitlines():
            f.write(json.dumps(json.loads(line)["text"]) + "\n")


def embed_once(binp, model, texts):
    out, wall, cpu = run_timed([binp, "embed", "--model", model, "--jsonl", "-"], stdin_path=texts)
    tokens = sum(json.loads(l)["tokens"] for l in out.decode().splitlines())
    return {"wall": wall, "cpu": cpu, "tokens": tokens}


def med(rs, key):
    return statistics.median(r[key] for r in rs)


def row(name, binp, model, corpus, work, runs, turns=False):
    db = os.path.join(work, "bench.db")
    texts = os.path.join(work, "texts.jsonl")
    first = index_once(binp, model, corpus, db)
    chunk_texts(binp, db, texts)
    ix, em, tt = [], [], []
    for _ in range(runs):
        ix.append(index_once(binp, model, corpus, db))
        em.append(embed_once(binp, model, texts))
        if turns:
            tt.append(index_once(binp, model, corpus, db, extra=("--mem-budget", "1024G")))
    tokens = first["tokens"]
    assert all(r["tokens"] == tokens for r in ix + em + tt), "index and embed embedded different text"
    r = {"corpus": name, "documents": first["documents"], "chunks": first["chunks"], "tokens": tokens,
         "index_tokens_per_s": tokens / med(ix, "wall"), "embed_tokens_per_s": tokens / med(em, "wall"),
         "index_tokens_per_cpu_s": tokens / med(ix, "cpu"), "embed_tokens_per_cpu_s": tokens / med(em, "cpu"),
         "index_runs": ix, "embed_runs": em}
    r["ratio"] = r["index_tokens_per_s"] / r["embed_tokens_per_s"]
    r["ratio_cpu"] = r["index_tokens_per_cpu_s"] / r["embed_tokens_per_cpu_s"]
    if tt:
        r["turns_tokens_per_s"] = tokens / med(tt, "wall")
        r["turns_tokens_per_cpu_s"] = tokens / med(tt, "cpu")
        r["turns_ratio"] = r["turns_tokens_per_s"] / r["embed_tokens_per_s"]
        r["turns_runs"] = tt
    print("%-12s %4d docs %5d chunks %7d tokens: index %6.0f tok/s, embed %6.0f tok/s: %3.0f%% (CPU s: %3.0f%%)%s" % (
        name, r["documents"], r["chunks"], tokens, r["index_tokens_per_s"], r["embed_tokens_per_s"], 100 * r["ratio"],
        100 * r["ratio_cpu"], ("; taking turns %6.0f tok/s: %3.0f%%" % (r["turns_tokens_per_s"], 100 * r["turns_ratio"])) if tt else ""),
        flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default=".models/all-MiniLM-L6-v2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=6, help="demo/corpus texts per format corpus")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--out", default="", help="write OUT.md and OUT.json")
    ap.add_argument("--no-demo", action="store_true", help="leave out the demo/corpus row")
    a = ap.parse_args()
    binp = os.path.join(ROOT, a.build, "modattn")
    work = tempfile.mkdtemp(prefix="modattn-index-vs-embed-")
    try:
        cpu_name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        load0, busy0, t0 = os.getloadavg(), cpu_busy(), time.time()
        ours0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dirs, pick = make_corpora(work, a.files)
        rows = [] if a.no_demo else [row("demo/corpus", binp, a.model, os.path.join(ROOT, "demo/corpus"), work, a.runs, turns=True)]
        for fmt in [f for f in a.formats.split(",") if f]:
            rows.append(row(fmt, binp, a.model, dirs[fmt], work, a.runs))
        t1, busy1, load1 = time.time(), cpu_busy(), os.getloadavg()
        ours1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = (ours1.ru_utime - ours0.ru_utime) + (ours1.ru_stime - ours0.ru_stime)
        ncpu = os.cpu_count()
        others = max(0.0, (busy1 - busy0) - ours) / ((t1 - t0) * ncpu)
        meta = {"cpu": cpu_name, "cpus": ncpu, "load_before": load0, "load_after": load1,
                "others_cpu_share": others, "seconds": t1 - t0, "runs": a.runs, "files_per_format": pick,
                "args": {"files": a.files, "runs": a.runs},
                "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                         text=True).stdout.strip(),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0))}
        print("load average %s -> %s; others used %.0f%% of the %d CPUs meanwhile" % (
            " ".join("%.2f" % x for x in load0), " ".join("%.2f" % x for x in load1), 100 * others, ncpu))
        if a.out:
            json.dump({"meta": meta, "rows": rows}, open(a.out + ".json", "w"), indent=1)
            write_md(a.out + ".md", meta, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_md(path, meta, rows):
    L = ["# Indexing at the encoder's speed: `modattn index` against `modattn embed` on the same text\n",
         "Made by `bench/index_vs_embed.py%s --out bench/results/index_vs_embed` (its docstring has the method) "
         "at commit %s, %s. Model all-MiniLM-L6-v2, fp32, 256-token chunks; %d runs a row, alternating index "
         "and embed, medians; tokens/s is the whole process's (model load included) for both.\n" % (
             "".join(" --%s %s" % (k, meta["args"][k]) for k in ("files", "runs") if k in meta.get("args", {})),
             meta["commit"], meta["when"], meta["runs"]),
         ("**Quiet host**: %s, %d CPUs; load average %s at the start, %s at the end; other processes used "
          "%.0f%% of the CPUs during the run. The ceiling for index is embed on the same text measured in the "
          "same minutes (the `embed` column); the CPU-seconds ratio (tokens per CPU second of each process) "
          "counts extraction in its child process too.\n"
          if meta["others_cpu_share"] < 0.10 else
          "**Under load**: %s, %d CPUs shared with other jobs; load average %s at the start, %s at the end; "
          "other processes used %.0f%% of the CPUs during the run. The absolute tokens/s are therefore low and "
          "noisy; the ceiling for index is embed on the same text measured in the same minutes (the `embed` "
          "column), and the ratio is what to read. The CPU-seconds ratio (tokens per CPU second of each "
          "process) is the least disturbed by the others.\n") % (
             meta["cpu"], meta["cpus"], " ".join("%.2f" % x for x in meta["load_before"]),
             " ".join("%.2f" % x for x in meta["load_after"]), 100 * meta["others_cpu_share"]),
         "The format rows are the text of %s (demo/corpus) written in each format by the script.\n" % ", ".join(meta["files_per_format"]),
         "| corpus | documents | chunks | tokens | index tokens/s | embed tokens/s (ceiling) | index / embed | index / embed, by CPU s |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        L.append("| %s | %d | %d | %d | %.0f | %.0f | **%.0f%%** | %.0f%% |" % (
            r["corpus"], r["documents"], r["chunks"], r["tokens"], r["index_tokens_per_s"], r["embed_tokens_per_s"],
            100 * r["ratio"], 100 * r["ratio_cpu"]))
    d = rows[0] if rows else {}
    if "turns_ratio" in d:
        L.append("\nBefore the pipeline (demo/corpus, the same runs): index taking turns with the model "
                 "(`--mem-budget 1024G`: under a memory budget the indexer waits for each batch, as every run did "
                 "before) %.0f tokens/s, **%.0f%%** of embed's (%.0f%% by CPU s); pipelined %.0f%%." % (
                     d["turns_tokens_per_s"], 100 * d["turns_ratio"],
                     100 * d["turns_tokens_per_cpu_s"] / d["embed_tokens_per_cpu_s"], 100 * d["ratio"]))
    small = [r["corpus"] for r in rows if r["tokens"] < 10000]
    if small:
        L.append("\nThe rows of under 10,000 tokens (%s) take a few seconds a process, the model's load a large "
                 "share of it, so under this load their wall-clock ratios scatter by tens of percent either "
                 "way from run to run; their CPU-seconds ratio is the steadier figure (extraction in its child "
                 "process counted). `--files N` makes them larger on a quieter machine." % ", ".join(small))
    L.append("\nTarget (issue 40 item 6): index >= 90% of embed's tokens/s on the same text. Per-run figures "
             "are in index_vs_embed.json.")
    open(path, "w").write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
