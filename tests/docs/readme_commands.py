#!/usr/bin/env python3
"""Run every command the README shows, and check the output it shows still matches.

usage: readme_commands.py REPO BUILD [--venv-python PY] [--venv-server PY] [--list]

A README that drifts from the program is a failing test. Every fenced block of README.md is read:
  ```sh       each line is a command (a trailing "# ..." is a comment for the reader); it must exit 0.
  ```console  "$ command" lines, each followed by the output it must print: an expected line matches
              when equal after trimming trailing spaces; "…" inside a line matches any text there, and a
              line that is only "..." matches any number of lines.
  ```python   the block runs as a script (openai blocks with the server venv's interpreter, the rest
              with the Python binding's venv).
Blocks of other languages (text, c, tables of output that are not a session) are not commands.

An HTML comment just before a block says what cannot run here, always with the reason, and the test
prints every such line; nothing is skipped quietly:
  <!-- readme-test: skip-line TEXT | REASON -->   a command containing TEXT is not run
  <!-- readme-test: skip-block REASON -->          no command of the block is run
  <!-- readme-test: may-fail TEXT | REASON -->     a command containing TEXT may exit 1 or 2 with a
                                                   message on stderr (never a signal, never silence)

The commands run in a sandbox, as a new user would type them: HOME is a folder holding notes/ and
papers/ (files of demo/corpus), the working folder has build/, .models/, examples/, python/ and demo/
linked from the repository, `modattn` is on PATH, and lines.txt and questions.txt exist. A `serve`
command starts in the background on a free port (the "8080" of later lines in its block is rewritten to
it), is waited for on /health, and is stopped with SIGTERM at the end of its block.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TIMEOUT = 300


class Block:
    def __init__(self, lang, lines, line_no, directives, section):
        self.lang, self.lines, self.line_no, self.directives = lang, lines, line_no, directives
        self.section = section  # the heading above it: a server lives until the section ends


def parse(readme):
    blocks, pending, lines = [], [], open(readme, encoding="utf-8").read().split("\n")
    i, section = 0, 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#"):
            section = i
        m = re.match(r"\s*<!-- readme-test: (skip-line|skip-block|may-fail) (.*?) -->\s*$", ln)
        if m:
            pending.append((m.group(1), m.group(2)))
            i += 1
            continue
        m = re.match(r"(\s*)```(\w*)\s*$", ln)
        if m:
            indent, lang, start = len(m.group(1)), m.group(2), i + 1
            body = []
            i += 1
            while i < len(lines) and not re.match(r"\s*```\s*$", lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            blocks.append(Block(lang, body, start, pending, section))
            pending = []
            i += 1
            continue
        if ln.strip() and pending and not ln.strip().startswith("<!--"):
            sys.exit(f"README.md:{i + 1}: a readme-test directive must come just before a code block")
        i += 1
    return blocks


def strip_comment(cmd):
    """Drop a trailing '# ...' comment that is outside quotes."""
    q, out = None, []
    for j, ch in enumerate(cmd):
        if q:
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
        elif ch == "#" and (j == 0 or cmd[j - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def commands(lines):
    """sh lines joined over trailing backslashes, comments and blank lines dropped."""
    out, cur = [], ""
    for ln in lines:
        s = strip_comment(ln) if not cur else ln.rstrip()
        if not cur and not s.strip():
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        out.append(cur.strip())
        cur = ""
    return out


def match_lines(expected, got):
    """expected lines against got lines; '...' alone = any lines, '…' in a line = any text."""
    def line_ok(e, g):
        parts = [re.escape(p) for p in e.rstrip().split("…")]
        return re.fullmatch(".*?".join(parts), g.rstrip()) is not None

    def rec(i, j):
        if i == len(expected):
            return j == len(got)
        if expected[i].strip() == "...":
            return any(rec(i + 1, jj) for jj in range(j, len(got) + 1))
        return j < len(got) and line_ok(expected[i], got[j]) and rec(i + 1, j + 1)
    return rec(0, 0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Runner:
    def __init__(self, repo, build, py_binding, py_server):
        self.repo, self.build = repo, build
        self.py_binding, self.py_server = py_binding, py_server
        self.failures, self.ran, self.skipped = [], 0, []
        self.sandbox = tempfile.mkdtemp(prefix="readme-test-")
        self.home = os.path.join(self.sandbox, "home")
        self.work = os.path.join(self.sandbox, "work")
        bindir = os.path.join(self.sandbox, "bin")
        for d in (self.home, self.work, bindir):
            os.makedirs(d)
        corpus = os.path.join(repo, "demo", "corpus")
        # small folders, so that the several index commands stay quick
        sets = {"notes": ["jargon-heisenbug.txt", "jargon-yak-shaving.txt", "modattn-store.md",
                          "sqlite-write-ahead-logging.html", "alice-ch07-a-mad-tea-party.html"],
                "papers": ["jargon-bit-rot.txt", "modattn-search.md",
                           "paradise-lost-book1-opening.pdf"]}
        for name, files in sets.items():
            os.makedirs(os.path.join(self.home, name))
            for f in files:
                shutil.copy(os.path.join(corpus, f), os.path.join(self.home, name, f))
        os.makedirs(os.path.join(self.work, "docs"))
        shutil.copy(os.path.join(corpus, "modattn-indexing.md"), os.path.join(self.work, "docs"))
        os.symlink(os.path.abspath(build), os.path.join(self.work, "build"))
        for d in (".models", "examples", "python", "demo"):
            os.symlink(os.path.join(repo, d), os.path.join(self.work, d))
        os.symlink(os.path.join(os.path.abspath(build), "modattn"), os.path.join(bindir, "modattn"))
        with open(os.path.join(self.work, "lines.txt"), "w") as f:
            f.write("a first line to embed\nand a second one\n")
        with open(os.path.join(self.work, "questions.txt"), "w") as f:
            f.write("what is a heisenbug\nwhy do programs rot\nwho came to the tea party\n")
        # the binding's venv first on PATH: `python3` there has numpy, as a user's would
        pydir = os.path.dirname(py_binding) + ":" if py_binding else ""
        self.env = dict(os.environ, HOME=self.home, PATH=bindir + ":" + pydir + os.environ.get("PATH", ""),
                        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_rmaps_base_oversubscribe="1", PYTHONPATH=os.path.join(os.path.abspath(build), "python"),
                        MODATTN_CACHE_DIR=os.path.join(self.sandbox, "cache"))
        for k in ("MODATTN_MODEL", "MODATTN_DB", "MODATTN_PORT"):
            self.env.pop(k, None)
        self.server = None
        self.port = None

    def fail(self, where, why):
        self.failures.append(f"{where}: {why}")
        print(f"FAIL {where}: {why}", flush=True)

    def sh(self, cmd, where, may_fail=None, prefix=""):
        if self.port:
            cmd = cmd.replace(":8080", f":{self.port}")
        if re.search(r"(^|\s)(build/)?modattn(\s.*)?\sserve(\s|$)", cmd):
            return self.start_server(cmd, where)
        self.ran += 1
        t0 = time.time()
        try:
            p = subprocess.run(["bash", "-c", prefix + cmd], cwd=self.work, env=self.env, capture_output=True,
                               timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail(where, f"`{cmd}` took over {TIMEOUT} s")
            return None
        dt = time.time() - t0
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        if p.returncode != 0:
            if may_fail and p.returncode in (1, 2) and err.strip():
                print(f"ok   {where}: `{cmd}` exit {p.returncode}, as the README allows ({may_fail}): "
                      f"{err.strip().splitlines()[-1]}", flush=True)
                return out
            self.fail(where, f"`{cmd}` exit {p.returncode}\n  stdout: {out[-1500:]}\n  stderr: {err[-1500:]}")
            return None
        if re.match(r'\s*\{\s*"error"', out):
            # an HTTP route's error object: curl -s exits 0 on a 4xx, the reader would see this
            self.fail(where, f"`{cmd}` answered an error: {out[:500]}")
            return None
        print(f"ok   {where}: `{cmd}` ({dt:.1f} s)", flush=True)
        return out

    def start_server(self, cmd, where):
        self.ran += 1
        self.port = free_port()
        portcmd = cmd + f" --port {self.port}"
        self.server = subprocess.Popen(["bash", "-c", "exec " + portcmd], cwd=self.work, env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.server.poll() is not None:
                self.fail(where, f"`{cmd}` exited {self.server.returncode}: "
                                 f"{self.server.stderr.read().decode(errors='replace')[-1500:]}")
                self.server, self.port = None, None
                return None
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        print(f"ok   {where}: `{cmd}` serving (port {self.port})", flush=True)
                        return ""
            except Exception:
                pass
            time.sleep(0.2)
        self.fail(where, f"`{cmd}` not healthy within 120 s")
        return None

    def stop_server(self, where):
        if not self.server:
            return
        self.server.send_signal(signal.SIGTERM)
        try:
            rc = self.server.wait(timeout=60)
            if rc != 0:
                self.fail(where, f"serve exited {rc} on SIGTERM")
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.fail(where, "serve did not stop within 60 s of SIGTERM")
        self.server, self.port = None, None

    def run_block(self, b):
        where = f"README.md:{b.line_no}"
        skip_block = [d[1] for d in b.directives if d[0] == "skip-block"]
        if skip_block:
            self.skipped.append(f"{where}: the whole block: {skip_block[0]}")
            return
        skip_lines = [d[1].split(" | ", 1) for d in b.directives if d[0] == "skip-line"]
        may_fail = [d[1].split(" | ", 1) for d in b.directives if d[0] == "may-fail"]
        for d in skip_lines + may_fail:
            if len(d) != 2 or not d[1].strip():
                sys.exit(f"{where}: a directive needs 'TEXT | REASON'")
        if b.lang == "sh":
            prefix = ""  # a block's `export` and `cd` lines hold for its later lines, as in one shell
            for cmd in commands(b.lines):
                sk = [r for t, r in skip_lines if t in cmd]
                if sk:
                    self.skipped.append(f"{where}: `{cmd}`: {sk[0]}")
                    continue
                if re.match(r"(export|cd)\s", cmd):
                    prefix += cmd + " && "
                mf = [r for t, r in may_fail if t in cmd]
                self.sh(cmd, where, mf[0] if mf else None, prefix if not cmd.startswith(("export", "cd")) else "")
        elif b.lang == "console":
            i = 0
            while i < len(b.lines):
                if not b.lines[i].startswith("$ "):
                    i += 1
                    continue
                cmd = b.lines[i][2:].strip()
                exp = []
                i += 1
                while i < len(b.lines) and not b.lines[i].startswith("$ "):
                    exp.append(b.lines[i])
                    i += 1
                while exp and not exp[-1].strip():
                    exp.pop()
                sk = [r for t, r in skip_lines if t in cmd]
                if sk:
                    self.skipped.append(f"{where}: `{cmd}`: {sk[0]}")
                    continue
                out = self.sh(cmd, where)
                if out is None:
                    continue
                got = out.rstrip("\n").split("\n") if out.strip() else []
                if not match_lines(exp, got):
                    self.fail(where, f"`{cmd}` printed\n    " + "\n    ".join(got[:40]) +
                              "\n  where the README shows\n    " + "\n    ".join(exp))
        elif b.lang == "python":
            src = "\n".join(b.lines)
            if self.port:
                src = src.replace(":8080", f":{self.port}")
            py = self.py_server if re.search(r"^\s*from openai|^\s*import openai", src, re.M) else self.py_binding
            if not py or not os.access(py, os.X_OK):
                self.fail(where, f"no interpreter with the block's packages ({py}); run the venv fixtures")
                return
            self.ran += 1
            p = subprocess.run([py, "-c", src], cwd=self.work, env=self.env, capture_output=True, timeout=TIMEOUT)
            if p.returncode != 0:
                self.fail(where, f"the python block exit {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
            else:
                print(f"ok   {where}: python block", flush=True)


def main():
    args = sys.argv[1:]
    opts = {"--venv-python": None, "--venv-server": None}
    pos, listing = [], False
    while args:
        a = args.pop(0)
        if a in opts:
            opts[a] = args.pop(0)
        elif a == "--list":
            listing = True
        else:
            pos.append(a)
    if len(pos) != 2:
        sys.exit(__doc__)
    repo, build = os.path.abspath(pos[0]), os.path.abspath(pos[1])
    # the README describes the full build: a build without a part it shows cannot run its commands
    ver = subprocess.run([os.path.join(build, "modattn"), "--version"], capture_output=True, text=True).stdout
    needs = {"devices: .*opencl": "the OpenCL device", "server: on": "the server",
             "ann: faiss": "FAISS (index --ann hnsw)", "mpi: on": "MPI (index --mpi)"}
    missing = [what for rx, what in needs.items() if not re.search(rx, ver)]
    if not os.path.isdir(os.path.join(build, "python", "modattn")):
        missing.append("the Python binding")
    if not shutil.which("mpirun"):
        missing.append("mpirun")
    if missing and not listing:
        print(f"SKIPPED: this build lacks {', '.join(missing)}, which the README's commands use")
        return 77
    blocks = [b for b in parse(os.path.join(repo, "README.md")) if b.lang in ("sh", "console", "python")]
    if listing:
        for b in blocks:
            print(f"README.md:{b.line_no} {b.lang} {b.directives}")
        return 0
    r = Runner(repo, build, opts["--venv-python"], opts["--venv-server"])
    try:
        section = None
        for b in blocks:
            if b.section != section:
                r.stop_server(f"README.md:{b.line_no}")
                section = b.section
            r.run_block(b)
    finally:
        r.stop_server("end")
        shutil.rmtree(r.sandbox, ignore_errors=True)
    for s in r.skipped:
        print(f"not run here: {s}")
    print(f"README commands: {r.ran} run, {len(r.failures)} failed, {len(r.skipped)} not run (reasons above)")
    return 1 if r.failures or r.ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
