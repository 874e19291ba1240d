#!/usr/bin/env python3
"""tests/cli/store_diff.py A.db B.db [--ids] — exit 0 when two stores hold the same documents
(path, hash, size, mtime, kind, chunking), chunks (seq, byte range, line, page, word pieces, text)
and vectors bit for bit (the BLOBs compared as bytes); with --ids the document and chunk ids too.
Says the first difference otherwise. The vector files (DB.vec) are compared by the search tests."""
import sqlite3
import sys


def rows(db, ids):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    docs = c.execute("select id, path, hash, mtime_ns, size, kind, chunk_tokens, overlap, nchunks from documents "
                     "order by path").fetchall()
    chunks = c.execute("select c.id, d.path, c.seq, c.start_byte, c.end_byte, c.line, c.page, c.ntokens, c.text, "
                       "e.vector from chunks c join documents d on d.id = c.document "
                       "left join embeddings e on e.chunk = c.id order by d.path, c.seq").fetchall()
    if not ids:
        docs = [d[1:] for d in docs]
        chunks = [ch[1:] for ch in chunks]
    return docs, chunks


def main():
    a, b = sys.argv[1], sys.argv[2]
    ids = "--ids" in sys.argv[3:]
    da, ca = rows(a, ids)
    db_, cb = rows(b, ids)
    if da != db_:
        for x, y in zip(da, db_):
            if x != y:
                sys.exit(f"documents differ: {x} vs {y}")
        sys.exit(f"documents differ: {len(da)} vs {len(db_)}")
    if ca != cb:
        for x, y in zip(ca, cb):
            if x != y:
                sys.exit(f"chunks differ at {x[:4]} vs {y[:4]}")
        sys.exit(f"chunks differ: {len(ca)} vs {len(cb)}")
    if any(ch[-1] is None for ch in ca):
        sys.exit("a chunk without a vector")
    print(f"same: {len(da)} documents, {len(ca)} chunks and vectors{' and ids' if ids else ''}")


main()
