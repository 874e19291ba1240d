"""modattn: sentence embeddings, attention and document search in C, from Python.

    import modattn
    m = modattn.Model(".models/all-MiniLM-L6-v2")
    vecs = m.encode(["first text", "second text"])        # numpy float32 (2, m.dim)

    out = modattn.attention(q, k, v, causal=True)          # numpy float32 (B, H, S, D) arrays
    print(modattn.explain(q, k, v, causal=True))           # which implementation runs it, and why

    with modattn.Store("notes.db", m) as s:
        s.index(["notes/"])                                # folders and files, recursively
        for hit in s.search("how does the store survive a crash", k=3):
            print(hit["score"], hit["path"], hit["line"])

Model.encode follows sentence-transformers' SentenceTransformer.encode (same keyword names where
they mean the same) and gives the vectors `modattn embed` gives, bit for bit. Every long call
releases the GIL: threads may encode with one Model at once. Errors of the library are
modattn.Error subclasses that are also the matching built-in exceptions (InvalidArgumentError is a
ValueError, NotFoundError a FileNotFoundError, OutOfMemoryError a MemoryError, ...).
"""

import os
from typing import List, Optional, Tuple, TypedDict

from ._modattn import (
    DEFAULT_BATCH_TOKENS,
    Error,
    FormatError,
    InputOutputError,
    InvalidArgumentError,
    Model,
    ModelMismatchError,
    NotFoundError,
    OutOfMemoryError,
    UnsupportedError,
    __version__,
    backends,
    check,
)
from ._modattn import CrossEncoder as _CrossEncoder
from ._modattn import SparseEncoder as _SparseEncoder
from ._modattn import Store as _Store
from ._modattn import attention as _attention
from ._modattn import explain as _explain

__all__ = [
    "CheckResult",
    "CrossEncoder",
    "Error",
    "FormatError",
    "IndexResult",
    "InputOutputError",
    "InvalidArgumentError",
    "Model",
    "ModelMismatchError",
    "NotFoundError",
    "OutOfMemoryError",
    "SearchHit",
    "SparseEncoder",
    "Store",
    "UnsupportedError",
    "__version__",
    "attention",
    "backends",
    "check",
    "explain",
]


class IndexResult(TypedDict):
    """What Store.index returns."""

    files_seen: int
    files_indexed: int
    files_unchanged: int
    files_skipped: int
    files_failed: int
    files_pruned: int
    chunks: int
    tokens: int
    bytes_read: int
    seconds: float
    vector_file: str  # "current", "appended", "written" or "not written"
    vector_file_note: str
    errors: List[Tuple[str, str]]  # (path, message)
    skipped: List[Tuple[str, str]]  # (path, reason)
    pruned: List[Tuple[str, str]]


class SearchHit(TypedDict):
    """One result of Store.search (byte offsets into the document's text; line and page 1-based, 0 if
    unknown; vector_rank, keyword_rank, cosine, bm25 None when that ranking did not bring it)."""

    rank: int
    score: float
    path: str
    start: int
    end: int
    start_byte: int  # = start (an older name, kept)
    end_byte: int  # = end
    line: int
    page: int
    kind: str
    text: str
    chunk_id: int
    vector_rank: Optional[int]
    keyword_rank: Optional[int]
    cosine: Optional[float]
    bm25: Optional[float]
    highlights: List[Tuple[int, int]]  # byte ranges of text that the query's words match
    found_by: str  # "meaning", "words" or "both": which rankings brought it (as the CLI and server);
    # with a sparse ranking, those that did joined by "+" ("sparse", "meaning+sparse", "meaning+words+sparse")
    sparse_rank: Optional[int]  # where the sparse ranking put it (None: not among its candidates)
    sparse_score: Optional[float]  # its sparse dot product with the query
    # with rerank=: the first stage's rank and score (score is then the cross-encoder's)
    first_stage_rank: int
    first_stage_score: float
    snippet: Tuple[int, int]  # byte range of text shown as its snippet (the best window; as the CLI and server)


class CrossEncoder(_CrossEncoder):
    """A cross-encoder (a Hugging Face *ForSequenceClassification directory, e.g.
    cross-encoder/ms-marco-MiniLM-L6-v2) read by modattn, shaped like sentence-transformers'
    CrossEncoder: predict(pairs) gives each (query, passage) pair's score (sigmoid of the logit for a
    one-label model, as sentence-transformers applies by default; raw=True for the logits), and
    rank(query, documents) the documents best first. The scores equal transformers' within 1e-5 and a
    pair's score does not depend on the other pairs.

        ce = modattn.CrossEncoder(".models/tiny-cross-encoder")
        ce.predict([("who makes honey", "Bees make honey.")])    # numpy float32 (1,)
        ce.rank("who makes honey", ["Bees make honey.", "A licence."], top_k=1)
    """

    def rank(self, query, documents, top_k=None, return_documents=False, batch_size=32, show_progress_bar=None,
             raw=False):
        """[{"corpus_id", "score"[, "text"]}] best first (ties: input order), top_k of them (None: all),
        as sentence-transformers' CrossEncoder.rank. A model of several labels is refused (ValueError):
        there is no one score to sort by."""
        if self.num_labels != 1:
            raise ValueError(f"rank() needs a one-label cross-encoder; this one has {self.num_labels} labels "
                             "(use predict())")
        docs = list(documents)
        scores = self.predict([(query, d) for d in docs], batch_size=batch_size, raw=raw) if docs else []
        order = sorted(range(len(docs)), key=lambda i: (-float(scores[i]), i))
        if top_k is not None:
            order = order[:top_k]
        out = []
        for i in order:
            r = {"corpus_id": i, "score": float(scores[i])}
            if return_documents:
                r["text"] = docs[i]
            out.append(r)
        return out


class SparseEncoder(_SparseEncoder):
    """A SPLADE model (a Hugging Face *ForMaskedLM directory, e.g. naver/splade-v3, or
    sentence-transformers' SparseEncoder layout of one) read by modattn, shaped like
    sentence-transformers' SparseEncoder: encode(texts) gives each text's vector, the max over its
    tokens of log(1 + ReLU(MLM logits)). Where sentence-transformers returns a sparse torch tensor,
    this returns, per text, a dict {token_id: weight} of the non-zero weights, ids ascending (no
    torch or scipy needed): a list of them for a list of texts, one dict for one text. The ids equal
    sentence-transformers' and the weights agree within 1e-5 relative + 5e-6 absolute (fp32's
    spread); a text's vector does not depend on the other texts.

        sp = modattn.SparseEncoder(".models/splade-tiny")
        v = sp.encode("who makes honey")                   # {2040: 2.05, 3084: 2.11, ...}
        sp.decode(v, top_k=3)                              # [("honey", 2.81), ("makes", 2.11), ...]
        sp.similarity(sp.encode(["a", "b"]), sp.encode(["a"]))
    """

    def encode_query(self, sentences, **kw):
        """encode(sentences): SPLADE models without prompts encode queries as documents."""
        return self.encode(sentences, **kw)

    def encode_document(self, sentences, **kw):
        """encode(sentences): SPLADE models without prompts encode documents as queries."""
        return self.encode(sentences, **kw)

    def decode(self, embeddings, top_k=None):
        """[(token, weight)] heaviest first (ties: smaller id first), top_k of them (None: all), as
        sentence-transformers' SparseEncoder.decode; a list of such lists for a list of vectors."""
        if isinstance(embeddings, dict):
            items = sorted(embeddings.items(), key=lambda kv: (-kv[1], kv[0]))
            if top_k is not None:
                items = items[:top_k]
            toks = self.convert_ids_to_tokens([k for k, _ in items])
            return [(t, float(w)) for t, (_, w) in zip(toks, items)]
        return [self.decode(e, top_k) for e in embeddings]

    @staticmethod
    def similarity(a, b):
        """The dot products of vectors a (a dict or a list of them) with vectors b: a list of rows,
        as sentence-transformers' SparseEncoder.similarity (dot product) gives a matrix."""
        a = [a] if isinstance(a, dict) else list(a)
        b = [b] if isinstance(b, dict) else list(b)
        return [[float(sum(w * y[k] for k, w in x.items() if k in y)) for y in b] for x in a]


class Store(_Store):
    """A document store (what `modattn index` makes) searched with a Model: see the module's help.

    search(query, k=10, mode="hybrid", path_prefix=None, sparse=None, sparse_weight=0, rerank=None,
    rerank_top=50): mode "hybrid", "vector", "keyword" or "sparse" (sparse needs sparse=, the
    SparseEncoder of the store's `index --sparse DIR`; given in hybrid mode on a store with sparse
    vectors, its ranking is fused in too). rerank= a CrossEncoder or a cross-encoder's directory:
    the first rerank_top candidates re-scored and re-ordered by it (ties: first-stage order), each
    keeping first_stage_rank and first_stage_score, as `modattn search --rerank DIR --rerank-top N`
    and the server's "rerank": true."""

    def index(self, paths, progress=True, *, sparse=None, **kw):
        """index(paths, progress=True, *, prune=False, chunk_tokens=0, overlap=-1, max_file_size=0,
        file_timeout=30.0, sparse=None): as `modattn index`; see _modattn.Store.index for the rest.

        sparse: as `modattn index --sparse DIR`: a SPLADE model's folder (a *ForMaskedLM directory,
        e.g. ".models/splade-tiny"; loaded once per Store) or a modattn.SparseEncoder. Each chunk's
        sparse vector is kept too, in the chunk's transaction, for search(mode="sparse") and hybrid
        search with sparse=. Given from a store's first document on (a store with chunks but no
        sparse vectors raises InvalidArgumentError); the store records the model, and later calls with sparse=None
        load the recorded folder, as the CLI's later runs without --sparse do. A folder without an
        MLM head raises UnsupportedError; another model than the store's, ModelMismatchError;
        anything but a path or a SparseEncoder, TypeError."""
        if sparse is None:
            rec = self.sparse_model()
            if rec is not None and rec["dir"]:
                sparse = rec["dir"]
        if sparse is not None and not isinstance(sparse, _SparseEncoder):
            if isinstance(sparse, (str, bytes)) or hasattr(sparse, "__fspath__"):
                key = os.fsdecode(sparse)
                cache = self.__dict__.setdefault("_sparse_encoders", {})
                enc = cache.get(key)
                if enc is None:
                    enc = cache[key] = SparseEncoder(key)
                sparse = enc
            else:
                raise TypeError(f"sparse: expected a SPLADE model's folder (str or os.PathLike) or a "
                                f"modattn.SparseEncoder, not {type(sparse).__name__}")
        return super().index(paths, progress, sparse=sparse, **kw)

    def search(self, query, k=10, mode="hybrid", path_prefix=None, sparse=None, sparse_weight=0.0, rerank=None,
               rerank_top=50):
        if rerank is None:
            return super().search(query, k, mode, path_prefix, sparse, sparse_weight)
        if isinstance(rerank, _CrossEncoder):
            ce = rerank
        else:
            cache = self.__dict__.setdefault("_rerankers", {})
            ce = cache.get(rerank)
            if ce is None:
                ce = cache[rerank] = CrossEncoder(rerank)
        if ce.num_labels != 1:
            raise ValueError(f"rerank needs a cross-encoder with one label (a relevance score); this one has "
                             f"{ce.num_labels} labels (see their scores with CrossEncoder.predict)")
        if isinstance(rerank_top, bool) or not isinstance(rerank_top, int) or not 1 <= rerank_top <= 1000:
            raise ValueError(f"rerank_top={rerank_top!r}: expected 1 to 1000")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10000:
            raise ValueError(f"k={k!r}: expected 1 to 10000")
        hits = super().search(query, max(k, rerank_top), mode, path_prefix, sparse, sparse_weight)
        top, rest = hits[:rerank_top], hits[rerank_top:]
        scores = ce.predict([(query if isinstance(query, str) else bytes(query).decode("utf-8", "replace"),
                              h["text"]) for h in top]) if top else []
        order = sorted(range(len(top)), key=lambda i: (-float(scores[i]), i))
        out = []
        for new, i in enumerate(order):
            h = dict(top[i])
            h["first_stage_rank"], h["first_stage_score"] = h["rank"], h["score"]
            h["rank"], h["score"] = new + 1, float(scores[i])
            out.append(h)
        for h in rest:  # past rerank_top: the first stage's order
            out.append(dict(h, rank=len(out) + 1))
        return out[:k]


class CheckResult(TypedDict):
    """What check() returns."""

    backend: str
    passed: int
    failed: int
    unsupported: int
    configurations: int
    worst_error_ratio: float
    first_failure: str
    unsupported_reason: str
    ok: bool
    text: str


def attention(q, k, v, *, causal=False, mask=None, kv_lens=None, scale=None, return_lse=False, backend="auto"):
    """softmax(scale * q k^T + mask) v, by modattn's dispatcher (or the implementation `backend` names).

    q: (B, Hq, Sq, D), k: (B, Hkv, Sk, D), v: (B, Hkv, Sk, Dv) float32 arrays, any strides (views are
    read in place, never copied); Hq a multiple of Hkv (grouped-query attention).
    causal: query i sees key j iff j <= i + (L - Sq), L = kv_lens[b] or Sk (bottom-right aligned).
    mask: additive float32 (B|1, Hq|1, Sq, Sk) or (Sq, Sk), entries finite or -inf; a bool mask is
      taken as True = may attend (turned into 0 / -inf).
    kv_lens: B ints, keys j >= kv_lens[b] are padding.  scale: None for 1/sqrt(D).
    Returns out (B, Hq, Sq, Dv) float32, and lse (B, Hq, Sq) too with return_lse=True. A row that sees
    no key gives zeros (and lse -inf). backend: "auto", an implementation (modattn.backends()), or
    "a,b" (that order, the next on failure).
    """
    if mask is not None and getattr(getattr(mask, "dtype", None), "kind", None) == "b":
        import numpy as np

        mask = np.where(mask, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)
    return _attention(q, k, v, causal=causal, mask=mask, kv_lens=kv_lens, scale=scale, return_lse=return_lse,
                      backend=backend)


def explain(q, k, v, *, causal=False, mask=None, kv_lens=None, scale=None, return_lse=False, backend="auto",
            device=None):
    """What the dispatcher would do with attention(q, k, v, ...) under `backend`: the implementation
    it picks, the capable ones in the order they would be tried, and each refusal with its reason.

    q, k, v (and mask) are arrays as for attention(), or their shapes: explain((1, 12, 128, 32),
    (1, 12, 128, 32), (1, 12, 128, 32), causal=True). device: where the tensors would be ("cpu" when
    None, "opencl", "opencl:1"). Returns the text `modattn explain` prints; it never raises because
    nothing can run the call (it says so), only for invalid arguments.
    """
    if mask is not None and getattr(getattr(mask, "dtype", None), "kind", None) == "b":
        mask = tuple(mask.shape)
    return _explain(q, k, v, causal=causal, mask=mask, kv_lens=kv_lens, scale=scale, return_lse=return_lse,
                    backend=backend, device=device)
