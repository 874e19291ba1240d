#!/usr/bin/env bash
# tests/pipeline/cli_unreadable.sh MODATTN MODEL_DIR — `index` over a folder holding a file its
# user may not read (mode 000): that file is reported as unreadable with the reason ("cannot read:
# Permission denied") on stderr and in --json's errors, the run exits 3, and the other files are
# indexed (in the store, searchable). Root reads any file, so as root (CI) the runs drop to the
# unprivileged user nobody (65534) with setpriv (util-linux) or runuser; without either, and as
# root, a skip (exit 77) with the reason. As any other user the file is unreadable as it is.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_unreadable
scratch cli-unreadable

as_user=()
if [ "$(id -u)" = 0 ]; then
  if command -v setpriv > /dev/null; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  elif command -v runuser > /dev/null; then as_user=(runuser -u nobody --)
  else
    echo "cli_unreadable: not run: running as root (reads any file) with neither setpriv nor runuser to drop to nobody"
    exit 77
  fi
  # the unprivileged user must reach the program, the model and the scratch folder
  if ! "${as_user[@]}" test -x "$BIN" -a -r "$MODEL/model.safetensors"; then
    echo "cli_unreadable: not run: user nobody cannot run $BIN or read $MODEL (a folder above them is not o+x)"
    exit 77
  fi
  chmod 755 "$T"
fi
run() { "${as_user[@]}" env HOME="$T/home" "$@"; }

mkdir -p "$T/home" "$T/c/sub"
printf 'The write-ahead log keeps the database safe after a crash.\n' > "$T/c/wal.txt"
printf 'Yak shaving is the work that comes before the work.\n' > "$T/c/sub/yak.txt"
printf 'A secret nobody may read: zebra quartz umbrella.\n' > "$T/c/secret.txt"
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$T/home" "$T/c" "$T"
chmod 000 "$T/c/secret.txt"
if [ "$(id -u)" != 0 ] && cat "$T/c/secret.txt" > /dev/null 2>&1; then
  echo "cli_unreadable: not run: a mode-000 file is readable here (CAP_DAC_OVERRIDE without root?)"
  exit 77
fi
check "the secret file is unreadable to the user the index runs as" test -n "$(run sh -c 'cat "$1" 2>&1 >/dev/null' sh "$T/c/secret.txt")"

# text output: the file named with its reason, exit 3, the others indexed
run "$BIN" index --model "$MODEL" --db "$T/a.db" "$T/c" > "$T/o" 2> "$T/e"; rc=$?
[ "$rc" = 3 ] && ok || bad "index with an unreadable file: exit $rc, not 3 (stderr: $(cat "$T/e"))"
check "stderr names the file and why ($(cat "$T/e"))" grep -q "secret.txt: cannot read: Permission denied" "$T/e"
check "stderr names no other file as unreadable ($(cat "$T/e"))" test "$(grep -c 'cannot read' "$T/e")" = 1
check "the summary counts one unreadable ($(cat "$T/o"))" grep -q "(1 unreadable)" "$T/o"

# --json: the same in errors[], the two readable files indexed
run "$BIN" index --json --model "$MODEL" --db "$T/b.db" "$T/c" > "$T/j" 2> "$T/e"; rc=$?
[ "$rc" = 3 ] && ok || bad "index --json: exit $rc, not 3 (stderr: $(cat "$T/e"))"
check "--json: the error with its reason, two files indexed: $(head -c 800 "$T/j")" python3 - "$T/j" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
errs = j["errors"]
assert len(errs) == 1 and errs[0]["path"].endswith("secret.txt"), errs
assert errs[0]["message"] == "cannot read: Permission denied", errs
assert j["files_indexed"] == 2 and j["files_seen"] == 3, j
PY
check "the store holds the readable files only" python3 - "$T/b.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
paths = sorted(p.rsplit("/", 1)[-1] for (p,) in c.execute("select path from documents"))
assert paths == ["wal.txt", "yak.txt"], paths
PY
run "$BIN" search --json -k 1 --model "$MODEL" --db "$T/b.db" "what is yak shaving" > "$T/s" 2> "$T/e" || bad "search: $(cat "$T/e")"
check "the readable files are searchable" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']; assert r and r[0]['path'].endswith('yak.txt'), r" "$T/s"

# made readable, the next run indexes it and exits 0
chmod 644 "$T/c/secret.txt"
run "$BIN" index --model "$MODEL" --db "$T/b.db" "$T/c" > "$T/o" 2> "$T/e"; rc=$?
[ "$rc" = 0 ] && ok || bad "index after chmod 644: exit $rc, not 0 (stderr: $(cat "$T/e"))"
check "then the store holds all three" python3 - "$T/b.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("select count(*) from documents").fetchone()[0] == 3
PY
finish cli_unreadable
