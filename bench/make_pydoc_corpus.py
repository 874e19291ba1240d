"""bench/make_pydoc_corpus.py OUT_DIR — a larger corpus for the search-quality evaluation, made
offline from what every Python install carries: the plain-text documentation (pydoc) of 60
standard-library modules, one file per module (OUT_DIR/<module>.txt). The expected documents of
bench/search_eval.jsonl are these module names, so the set stays valid across Python versions even
though the texts change a little."""
import os
import pydoc
import sys
import importlib

MODULES = """argparse base64 bisect bz2 calendar cmath codecs collections colorsys configparser contextlib
copy csv dataclasses datetime decimal difflib enum errno fnmatch fractions functools getpass gettext
glob gzip hashlib heapq hmac html ipaddress itertools json locale logging lzma math mimetypes operator
pathlib pickle platform pprint queue random re sched secrets shlex shutil sqlite3 statistics string
struct tempfile textwrap timeit unicodedata uuid weakref zipfile zlib""".split()

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name in MODULES:
    mod = importlib.import_module(name)
    text = pydoc.render_doc(mod, renderer=pydoc.plaintext)
    # pydoc names where the module lives on this machine (FILE, MODULE REFERENCE): not content
    lines = [l for l in text.splitlines() if not l.strip().startswith(("/", "https://docs.python.org"))]
    open(os.path.join(out, name + ".txt"), "w").write("\n".join(lines) + "\n")
print(f"make_pydoc_corpus: {len(MODULES)} modules into {out}")
