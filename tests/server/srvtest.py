"""tests/server/srvtest.py — what the server tests share: start `modattn serve` on a free loopback
port (its --port-file says which), wait until /health says ready, talk HTTP with the standard
library, and stop it with SIGTERM, checking that it exits 0. Counts checks like the C tests'
harness: every check can fail, and the script ends with "N passed, N failed"."""
import http.client
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what, file=sys.stderr, flush=True)
    return cond


def finish(name):
    print(f"{name}: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


class Server:
    """A `modattn serve` process on a free port of 127.0.0.1."""

    def __init__(self, binary, model, *args, env=None, wait_ready=True, log=None):
        self.dir = tempfile.mkdtemp(prefix="modattn-serve-")
        self.port_file = os.path.join(self.dir, "port")
        self.log_path = log or os.path.join(self.dir, "server.log")
        e = dict(os.environ)
        e.update(env or {})
        cmd = [binary, "serve", "--model", model, "--port", "0", "--port-file", self.port_file, *args]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        t0 = time.time()
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError(f"modattn serve exited {self.proc.returncode}: {self.read_log()}")
            if time.time() - t0 > 60:
                raise RuntimeError("modattn serve did not listen within 60 s: " + self.read_log())
            time.sleep(0.02)
        self.port = int(open(self.port_file).read())
        if wait_ready:
            self.wait_ready()

    def read_log(self):
        self.log.flush()
        try:
            return open(self.log_path, errors="replace").read()[-4000:]
        except OSError:
            return ""

    def wait_ready(self, limit=120):
        t0 = time.time()
        while time.time() - t0 < limit:
            try:
                st, _, _ = self.request("GET", "/health")
                if st == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"modattn serve exited {self.proc.returncode}: {self.read_log()}")
            time.sleep(0.05)
        raise RuntimeError("modattn serve not ready: " + self.read_log())

    def request(self, method, path, body=None, headers=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data

    def post(self, path, obj, headers=None, timeout=120):
        st, h, data = self.request("POST", path, obj, headers, timeout)
        try:
            j = json.loads(data)
        except ValueError:
            j = None
        return st, h, j

    def rss_kb(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self, timeout=60):
        """SIGTERM; the exit status (0 expected)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        self.log.close()
        return self.proc.returncode


def floats_bits(values):
    """A list of numbers as float32 bit patterns (what 'bit for bit' compares)."""
    return struct.pack(f"<{len(values)}f", *values)


def embed_cli(binary, model, texts):
    """`modattn embed` of the texts (stdin, --jsonl): the vectors as float32 bytes each."""
    data = "".join(json.dumps(t) + "\n" for t in texts)
    r = subprocess.run([binary, "embed", "--model", model, "--jsonl", "-"], input=data.encode(),
                       capture_output=True, check=True)
    out = [json.loads(l) for l in r.stdout.decode().splitlines()]
    return [floats_bits(o["embedding"]) for o in out], [o["tokens"] for o in out]


def error_shape(j):
    """OpenAI's error object: {"error": {"message", "type", "param", "code"}}."""
    return (isinstance(j, dict) and isinstance(j.get("error"), dict)
            and set(j["error"]) == {"message", "type", "param", "code"}
            and isinstance(j["error"]["message"], str) and j["error"]["message"])
