#!/usr/bin/env python3
"""tools/api_rename.py — the public API in tiers (issue 43 item 3), as a mechanical, re-runnable rewrite.

    python3 tools/api_rename.py            # rewrite the tree (idempotent: a second run changes nothing)
    python3 tools/api_rename.py --check    # exit 1 and list what a run would change (nothing written)

What it does, in order, over every file git knows or would add (git ls-files -co --exclude-standard):
  1. MOVES: public headers of the implementer's tier go to include/modattn/backend/; every mention of
     the old path (#include "modattn/impl.h", docs, tools/layers.txt) is rewritten.
  2. INTERNAL: the functions of INTERNAL leave the public API: modattn_NAME -> modattn__NAME in every
     C file, header, Python, shell, CMake and Markdown file (whole words only), so the version script
     (generated from the public headers' modattn_NAME( declarations) no longer exports them.
  3. DECLARATIONS: a declaration of a modattn__NAME function still in a public header (with the
     comment right above it) moves to that header's internal twin (HIDDEN_HEADER; not installed).
  4. INCLUDES: a C file or internal header using a modattn__NAME declared in an internal twin gets
     #include "<twin>" after its last #include "modattn/..." line.
The lead re-runs it after merging other branches: their new uses of an old name are renamed and get
the include. After a merge whose conflicts lie in files this rewrite touched only mechanically (all
but CMakeLists.txt, README.md, docs/, pyproject.toml, include/modattn/{modattn,dispatch,search}.h,
tests/install/, tests/python/test_errors.py), take the other branch's side of the file and run it
again; `--check` then prints nothing, and ctest `layers` and `install_pkgconfig` pass. A new public function needs no entry here (it is exported and must be added to
tests/install/exports.txt); a new internal one is written modattn__NAME in an internal header.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# 1. whole headers that move (old path under include/ -> new path under include/)
MOVES = {
    "modattn/impl.h": "modattn/backend/impl.h",
    "modattn/device.h": "modattn/backend/device.h",
    "modattn/conformance.h": "modattn/backend/conformance.h",
}

# 3. each public header's internal twin (in its layer's folder; never installed)
HIDDEN_HEADER = {
    "include/modattn/status.h": "core/internal_status.h",
    "include/modattn/core.h": "core/internal_core.h",
    "include/modattn/backend/device.h": "device/internal_device.h",
    "include/modattn/dispatch.h": "attn/internal_dispatch.h",
    "include/modattn/model.h": "model/internal_model.h",
    "include/modattn/ingest.h": "pipeline/internal_ingest.h",
    "include/modattn/store.h": "pipeline/internal_store.h",
    "include/modattn/search.h": "pipeline/internal_search.h",
    "include/modattn/ann.h": "pipeline/internal_ann.h",
}

# 2. the functions that become internal, by the header that declared them (modattn_ + name)
INTERNAL = {
    "status.h": "error error_prefix",
    "core.h": """env_check malloc calloc realloc strdup strndup mem_block_size mem_last_status mem_account
        mem_reset_peak parse_bytes mem_fail_nth mem_fail_counter json_count_allocations
        json_allocations_counted json_free json_load_file json_loadb json_take_failure cpu_get
        cpu_describe now_ns pool_create pool_free pool_run pool_threads trace_begin trace_clear
        trace_count trace_enable trace_enabled trace_end trace_get trace_record trace_write_json""",
    "device.h": """devices_init device_synchronize device_control device_embed device_linear device_pool
        device_host_embed device_host_linear device_host_pool device_fallback_count device_has_graph
        device_graph_supports device_graph_load device_graph_forward device_graph_unload
        device_mem_reserve device_mem_release device_mem_get_stats device_row_block
        device_linear_prepare linear_plan_free buffer_alloc buffer_copy buffer_fill buffer_free
        buffer_from_host buffer_read buffer_write tensor_on_buffer""",
    "dispatch.h": """ctx_impl ctx_impl_stats ctx_fallbacks tune_note session_ctx session_pool session_exec""",
    "model.h": "",
    "tokenizer.h": "",
    "ingest.h": "path_absolute utf8_valid utf8_sanitize utf16_bom utf16_to_utf8 sniff_unsupported",
    "store.h": """store_account_sqlite_memory store_add_roots store_begin store_commit store_rollback
        store_bind_model store_chunk_clear store_chunk_ids_under store_each_path store_find_document
        store_get_chunk store_get_model_dir store_set_model_dir store_has_keywords
        store_keyword_query store_keyword_spans store_keyword_topk store_load_vectors
        store_open_vectors store_vectors_free store_put_chunk store_put_document store_touch_document
        store_read_begin store_read_end store_vector_file_current store_vector_file_path
        store_write_vector_file""",
    "search.h": """scan_isa_name scan_isa_auto scan_isa_available topk topk_masked topk_batch
        store_vectors_topk store_vectors_topk_among store_vectors_topk_batch store_vectors_find
        scan_scores vec_normalize search_run search_run_ann search search_vectors search_with
        search_batch search_ex searcher_share_create searcher_share_free searcher_create_shared
        searcher_vectors searcher_search_vector keyword_query""",
    "ann.h": """ann_open ann_close ann_get_kind ann_get_params ann_topk_batch ann_peek ann_resolve ann_rows
        ann_file_bytes ann_kind_needs_faiss store_ann_file_path""",
}
RENAMES = {"modattn_" + n: "modattn__" + n for v in INTERNAL.values() for n in v.split()}

TEXT_EXT = (".c", ".h", ".cpp", ".cc", ".in", ".py", ".pyi", ".sh", ".md", ".txt", ".cmake", ".map")
SKIP = ("tests/install/exports.txt", "tools/api_rename.py", "docs/API.md")  # the build's list; the map; its story
SKIP_DIRS = (".deps/", ".models/", "build/", "build-", ".git/")


def tree_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    for f in out:
        if not f or f in SKIP or f.startswith(SKIP_DIRS):
            continue
        if f.endswith(TEXT_EXT) or os.path.basename(f) in ("CMakeLists.txt", "Makefile"):
            if os.path.isfile(os.path.join(ROOT, f)) and not os.path.islink(os.path.join(ROOT, f)):
                yield f


# whole words, and the linker's --wrap names (__wrap_modattn_now_ns, __real_...) of a test's fakes
RENAME_RE = re.compile(r"(?:\b|(?<=__wrap_)|(?<=__real_))(" + "|".join(sorted(map(re.escape, RENAMES), key=len, reverse=True)) + r")\b")


def rewrite_text(text):
    for old, new in MOVES.items():
        text = re.sub(r"(?<![\w/])" + re.escape(old) + r"\b", new, text)
        text = text.replace("include/" + old, "include/" + new)  # 'include/modattn/impl.h' in prose
    return RENAME_RE.sub(lambda m: RENAMES[m.group(1)], text)


DECL_START = re.compile(r"^(?!static\b|typedef\b|#|/\*|\s|//|extern\b|struct\s+\w+\s*;)[A-Za-z_].*\bmodattn__\w+\s*\(")


def split_public_header(text):
    """Returns (public text, [moved blocks]): declarations of modattn__ functions, with their comment."""
    lines = text.split("\n")
    moved, keep, i = [], [], 0
    while i < len(lines):
        if DECL_START.match(re.sub(r"/\*.*?(\*/|$)", "", lines[i])):
            j, depth = i, 0
            while True:
                code = re.sub(r"/\*.*?\*/", "", lines[j])
                depth += code.count("(") - code.count(")")
                if depth <= 0 and ";" in code:
                    break
                j += 1
            # the comment right above (no blank line between), if it is a whole comment
            k = len(keep)
            if k and keep[-1].rstrip().endswith("*/"):
                s = k - 1
                while s >= 0 and "/*" not in keep[s]:
                    s -= 1
                if s >= 0 and keep[s].lstrip().startswith("/*") and "---" not in keep[s]:
                    block = keep[s:] + lines[i:j + 1]
                    del keep[s:]
                else:
                    block = lines[i:j + 1]
            else:
                block = lines[i:j + 1]
            moved.append("\n".join(block))
            i = j + 1
            continue
        keep.append(lines[i])
        i += 1
    return "\n".join(keep), moved


def twin_skeleton(twin, public):
    guard = "MODATTN_" + re.sub(r"\W", "_", twin.upper())
    inc = public[len("include/"):]
    return (f"/* {twin} — the library's own functions of {inc} (issue 43: the public API in tiers).\n"
            f" * Not installed and not exported (modattn__ names; the version script is generated from the\n"
            f" * public headers): for the library, the CLI, the server, the Python module, the tests and the\n"
            f" * benchmarks, which are built from this tree. Written by tools/api_rename.py. */\n"
            f"#ifndef {guard}\n#define {guard}\n\n#include \"{inc}\"\n\n"
            f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n#ifdef __cplusplus\n}}\n#endif\n#endif\n")


def decl_name(block):
    code = re.sub(r"/\*.*?\*/", "", block, flags=re.S)
    m = re.search(r"\b(modattn__\w+)\s*\(", code)
    return m.group(1) if m else None


def add_to_twin(twin_text, blocks):
    """Appends each block, or replaces the twin's declaration of the same function (a merged branch
    that changed a declaration still in its copy of the public header: its version wins)."""
    marker = "\n#ifdef __cplusplus\n}\n#endif\n#endif\n"
    assert twin_text.endswith(marker), "internal header lost its tail"
    body = twin_text[: -len(marker)]
    _, have = split_public_header(body)
    have = {decl_name(b): b for b in have}
    for b in blocks:
        old = have.get(decl_name(b))
        if old is not None and old in body:
            body = body.replace(old, b.strip("\n"), 1)
        else:
            body = body.rstrip("\n") + "\n\n" + b.strip("\n") + "\n"
    return body + marker


INCLUDE_RE = re.compile(r'^#\s*include\s+"([^"]+)"', re.M)


def add_includes(path, text, declared_in):
    if not path.endswith((".c", ".h", ".cpp", ".cc", ".c.in")) or path.startswith("include/modattn/"):
        return text
    used = set(re.findall(r"\bmodattn__\w+", text))
    need = sorted({declared_in[s] for s in used if s in declared_in} - {path})
    have = set(INCLUDE_RE.findall(text))
    need = [n for n in need if n not in have]
    if not need:
        return text
    lines = text.split("\n")
    at = None
    for idx, line in enumerate(lines):
        m = INCLUDE_RE.match(line)
        if m and (m.group(1).startswith("modattn/") or at is None):
            at = idx
    if at is None:
        for idx, line in enumerate(lines):
            if line.startswith("#include"):
                at = idx
    if at is None:
        sys.exit(f"api_rename: {path} uses {need} but has no #include to put them after")
    lines[at + 1:at + 1] = [f'#include "{n}"' for n in need]
    return "\n".join(lines)


def main():
    check = "--check" in sys.argv[1:]
    changed = {}

    def read(p):
        if p in changed:
            return changed[p]
        with open(os.path.join(ROOT, p), encoding="utf-8", errors="surrogateescape") as f:
            return f.read()

    def write(p, t):
        if not os.path.exists(os.path.join(ROOT, p)) or read(p) != t:
            changed[p] = t

    moved_files = []
    for old, new in MOVES.items():
        src, dst = "include/" + old, "include/" + new
        if os.path.exists(os.path.join(ROOT, src)):
            moved_files.append((src, dst))
            changed[dst] = read(src)
    files = [f for f in tree_files() if f not in dict(moved_files)] + [d for _, d in moved_files]
    for f in files:
        t = read(f)
        write(f, rewrite_text(t))
    for public, twin in HIDDEN_HEADER.items():
        if public not in changed and not os.path.exists(os.path.join(ROOT, public)):
            continue
        pub_text, blocks = split_public_header(read(public))
        if not blocks:
            continue
        write(public, pub_text)
        tt = read(twin) if (twin in changed or os.path.exists(os.path.join(ROOT, twin))) else twin_skeleton(twin, public)
        write(twin, add_to_twin(tt, blocks))
        if twin not in files:
            files.append(twin)
    declared_in = {}
    for twin in HIDDEN_HEADER.values():
        if twin in changed or os.path.exists(os.path.join(ROOT, twin)):
            for s in re.findall(r"\b(modattn__\w+)\s*\(", read(twin)):
                declared_in.setdefault(s, twin)
    for f in files:
        write(f, add_includes(f, read(f), declared_in))

    if check:
        for src, dst in moved_files:
            print(f"move {src} -> {dst}")
        for p in sorted(changed):
            print(f"rewrite {p}")
        return 1 if changed or moved_files else 0
    for src, dst in moved_files:
        os.makedirs(os.path.dirname(os.path.join(ROOT, dst)), exist_ok=True)
        if subprocess.run(["git", "mv", src, dst], cwd=ROOT, capture_output=True).returncode != 0:
            os.rename(os.path.join(ROOT, src), os.path.join(ROOT, dst))
    for p, t in changed.items():
        os.makedirs(os.path.dirname(os.path.join(ROOT, p)) or ".", exist_ok=True)
        with open(os.path.join(ROOT, p), "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(t)
    print(f"api_rename: {len(moved_files)} headers moved, {len(changed)} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
