#!/usr/bin/env python3
"""tests/skip_summary.py JUNIT_XML [LABEL] — after ctest (make test-plain / test-sanitize run it):
every test CTest did not run (skipped: exit 77 or a skip expression; or not run: a failed fixture,
a missing program) with its reason, taken from the test's own output, and the skips inside the
entries that passed: pytest's ("SKIPPED [n] file:line: reason", from pytest -rs) and a C test's
part not run here, printed the same way (test_bf16x3: "SKIPPED [1] ...: not run: no AMX"). A skip is
never a pass: this makes each one visible in the log, with why. Exit status 0 (the ctest run
decides the make target's status); 1 only when the file cannot be read."""

import sys
import xml.etree.ElementTree as ET


def reason_of(out):
    """The lines of a test's output that say why it did not run (else its last line)."""
    lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()]
    keys = ("not available here", "skipped", "not run", "fail:")
    why = [ln for ln in lines if any(k in ln.lower() for k in keys)]
    return why or lines[-1:] or ["(no output)"]


def main():
    if len(sys.argv) < 2:
        print("usage: skip_summary.py JUNIT_XML [LABEL]", file=sys.stderr)
        return 2
    label = sys.argv[2] if len(sys.argv) > 2 else "ctest"
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"{label}: cannot read the test results {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    cases = root.iter("testcase")
    notrun, inner, total = [], [], 0
    for c in cases:
        total += 1
        out = c.findtext("system-out") or ""
        status = c.get("status", "")
        if status in ("notrun", "disabled") or c.find("skipped") is not None:
            sk = c.find("skipped")
            how = sk.get("message", "") if sk is not None else status
            notrun.append((c.get("name"), how, reason_of(out)))
        elif status == "run":
            inner += [(c.get("name"), ln.strip()) for ln in out.splitlines() if ln.startswith("SKIPPED [")]
    print(f"== {label}: {len(notrun)} of {total} tests not run (skipped), each with its reason:")
    for name, how, why in notrun:
        print(f"  {name} ({how or 'not run'}):")
        for ln in why[:6]:
            print(f"      {ln}")
    if inner:
        print(f"== {label}: {len(inner)} skips inside passing entries (pytest -rs, and C tests' "
              f"'SKIPPED [n] ...' lines for a part not run here):")
        for name, ln in inner:
            print(f"  {name}: {ln}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
