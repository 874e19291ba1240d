#!/usr/bin/env python3
"""demo/make_corpus.py — how demo/corpus/ was made (run once, at authoring time; the results are
committed, so `make demo` and the tests need none of this).

Sources (all public domain, or the project's own docs; see demo/corpus/SOURCES.md):
  * PyPI `brotli` 1.2.1 source distribution, tests/testdata/: files of the Canterbury corpus,
    which are Project Gutenberg etexts: alice29.txt (Lewis Carroll, Alice's Adventures in
    Wonderland, 1865), asyoulik.txt (Shakespeare, As You Like It), plrabn12.txt (Milton,
    Paradise Lost, 1667), lcet10.txt (Library of Congress, Workshop on Electronic Texts,
    Proceedings, 1992).
  * Debian bookworm `dict-devil` 1.0-13.1: Ambrose Bierce, The Devil's Dictionary (1911).
  * Debian bookworm `dict-jargon` 4.4.7-3.1: The Jargon File 4.4.7 (public domain).
  * Debian bookworm `sqlite3-doc` 3.40.1-2+deb12u2: SQLite's HTML documentation (public domain).
  * the project's README.md and shared/DESIGN.md, and three short docs written for the corpus.
PDFs are typeset from the public-domain text with fpdf2 (PyPI, used only here).

usage (from the repository root; needs network access to PyPI and Debian, and fpdf2):
  python3 -m venv /tmp/venv-corpus && /tmp/venv-corpus/bin/pip install fpdf2
  /tmp/venv-corpus/bin/python demo/make_corpus.py WORKDIR
WORKDIR receives the downloads; demo/corpus/ is rewritten, except the hand-written docs
(modattn-*.md written for the corpus) and SOURCES.md, which are kept as they are.
"""
import glob
import gzip
import html
import os
import re
import shutil
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "demo", "corpus")
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

JARGON = ["hacker", "kludge", "cruft", "foo", "heisenbug", "bit rot", "feature creep",
          "bikeshedding", "magic smoke", "yak shaving", "wizard", "guru"]
DEVIL_LETTERS = ["B", "L"]
SQLITE = {"wal.html": "sqlite-write-ahead-logging.html",
          "lang_transaction.html": "sqlite-transactions.html",
          "whentouse.html": "sqlite-when-to-use.html",
          "isolation.html": "sqlite-isolation.html"}


def fetch(work):
    os.makedirs(work, exist_ok=True)
    if not glob.glob(os.path.join(work, "brotli-1.2.1.tar.gz")):
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                               ":all:", "-d", work, "brotli==1.2.1"])
    debs = os.path.join(work, "debs")
    os.makedirs(debs, exist_ok=True)
    if not glob.glob(os.path.join(debs, "*.deb")):
        subprocess.check_call(["apt-get", "download", "dict-devil", "dict-jargon", "sqlite3-doc"],
                              cwd=debs)
    x = os.path.join(work, "x")
    if not os.path.isdir(x):
        for deb in glob.glob(os.path.join(debs, "*.deb")):
            subprocess.check_call(["dpkg", "-x", deb, x])
        with tarfile.open(os.path.join(work, "brotli-1.2.1.tar.gz")) as t:
            t.extractall(x)
    return x


def lines(path):
    with open(path, encoding="ascii") as f:
        return [l.rstrip("\r\n").rstrip() for l in f]


def write(name, text):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(text)


def dict_entries(x, name):
    base = os.path.join(x, "usr/share/dictd", name)
    data = gzip.open(base + ".dict.dz").read()
    def dec(s):
        v = 0
        for c in s:
            v = v * 64 + B64.index(c)
        return v
    out = []
    for line in open(base + ".index", encoding="utf-8"):
        word, off, length = line.rstrip("\n").split("\t")
        if not word.startswith("00"):
            out.append((word, data[dec(off):dec(off) + dec(length)].decode("utf-8")))
    return out


def paragraphs(ls):
    text = "\n".join(ls)
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def pdf(name, title, body_lines, source):
    from fpdf import FPDF
    doc = FPDF(format="A4")
    doc.set_title(title)
    doc.set_creator("modattn demo/make_corpus.py (fpdf2)")
    doc.set_auto_page_break(True, margin=18)
    doc.add_page()
    doc.set_font("Helvetica", "B", 15)
    doc.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    doc.ln(2)
    doc.set_font("Helvetica", "I", 9)
    doc.multi_cell(0, 5, source, new_x="LMARGIN", new_y="NEXT")
    doc.ln(3)
    doc.set_font("Times", "", 11)
    for l in body_lines:
        doc.multi_cell(0, 5.2, l if l else " ", new_x="LMARGIN", new_y="NEXT")
    doc.output(os.path.join(OUT, name))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    x = fetch(sys.argv[1])
    td = os.path.join(x, "brotli-1.2.1/tests/testdata")
    os.makedirs(OUT, exist_ok=True)

    # Alice: chapter I as text, chapter VII as HTML
    alice = lines(os.path.join(td, "alice29.txt"))
    starts = [i for i, l in enumerate(alice) if l.strip().startswith("CHAPTER ")]
    ch1 = alice[starts[0]:starts[1]]
    write("alice-ch01-down-the-rabbit-hole.txt",
          "Alice's Adventures in Wonderland, by Lewis Carroll (1865)\n\n" + "\n".join(ch1).strip() + "\n")
    ch7 = alice[starts[6]:starts[7]]
    paras = [p for p in paragraphs(ch7[1:]) if p != "A Mad Tea-Party"]
    body = "\n".join("<p>%s</p>" % html.escape(p, quote=False).replace("`", "&lsquo;").replace("'", "&rsquo;")
                     for p in paras)
    write("alice-ch07-a-mad-tea-party.html",
          "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>A Mad Tea-Party &mdash; Alice&rsquo;s Adventures in Wonderland</title>\n"
          "<style>body { max-width: 40em; margin: auto; font-family: serif; }</style>\n"
          "<script>document.documentElement.className = 'js';</script>\n</head>\n<body>\n"
          "<nav><a href=\"alice-ch01-down-the-rabbit-hole.txt\">Chapter I</a></nav>\n"
          "<h1>Chapter VII</h1>\n<h2>A Mad Tea-Party</h2>\n" + body +
          "\n<footer><p><small>Lewis Carroll, 1865. Public domain (Project Gutenberg etext, "
          "Millennium Fulcrum Edition 2.9).</small></p></footer>\n</body>\n</html>\n")

    # As You Like It, Act II scene VII ("All the world's a stage")
    ayli = lines(os.path.join(td, "asyoulik.txt"))
    a = next(i for i, l in enumerate(ayli) if l.startswith("SCENE VII\tThe forest."))
    b = next(i for i in range(a + 1, len(ayli)) if ayli[i].startswith("ACT III"))
    write("as-you-like-it-act2-scene7.txt",
          "As You Like It, by William Shakespeare\nACT II\n" + "\n".join(ayli[a:b]).strip() + "\n")

    # Paradise Lost, the opening of Book I, as PDF
    pl = lines(os.path.join(td, "plrabn12.txt"))
    a = next(i for i, l in enumerate(pl) if l.strip() == "Book I")
    pdf("paradise-lost-book1-opening.pdf", "Paradise Lost, Book I (lines 1-330), by John Milton",
        [l.strip() for l in pl[a + 1:a + 1 + 340]],
        "John Milton, 1667. Public domain; text of the Project Gutenberg etext of February 1992.")

    # Library of Congress workshop, abstracts of session IV, as PDF
    lc = lines(os.path.join(td, "lcet10.txt"))
    a = next(i for i, l in enumerate(lc) if l.strip() == "SESSION IV-A")
    b = next(i for i in range(a + 1, len(lc)) if lc[i].strip() == "SESSION VI")
    pdf("loc-workshop-1992-image-and-text-capture.pdf",
        "Workshop on Electronic Texts, Proceedings (Library of Congress, 1992): abstracts of "
        "Session IV, image capture and text capture", [l.rstrip() for l in lc[a:b]],
        "Edited by James Daly, Library of Congress, 9-10 June 1992. Project Gutenberg etext "
        "lcet10; a work of the Library of Congress.")

    # The Jargon File: one file per entry
    jargon = dict(dict_entries(x, "jargon"))
    for w in JARGON:
        write("jargon-%s.txt" % w.replace(" ", "-"),
              "From The Jargon File, version 4.4.7 (public domain)\n\n" + jargon[w].strip() + "\n")

    # The Devil's Dictionary: whole letters
    devil = dict_entries(x, "devil")
    for letter in DEVIL_LETTERS:
        es = [t.strip() for w, t in devil if w[:1].upper() == letter]
        write("devils-dictionary-%s.txt" % letter.lower(),
              "The Devil's Dictionary, by Ambrose Bierce (1911): the letter %s\n\n" % letter
              + "\n\n".join(es) + "\n")

    # SQLite documentation pages, as they are
    for src, dst in SQLITE.items():
        shutil.copy(os.path.join(x, "usr/share/doc/sqlite3", src), os.path.join(OUT, dst))

    # the project's own docs
    shutil.copy(os.path.join(ROOT, "README.md"), os.path.join(OUT, "modattn-readme.md"))
    design = os.path.join(ROOT, "..", "shared", "DESIGN.md")
    if os.path.exists(design):
        shutil.copy(design, os.path.join(OUT, "modattn-design.md"))


if __name__ == "__main__":
    main()
