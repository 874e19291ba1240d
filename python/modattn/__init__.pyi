# Type stubs for modattn (the package and its C extension modattn._modattn).
import os
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Type, TypedDict, Union, final, overload

import numpy as np
import numpy.typing as npt

__all__ = [
    "CheckResult",
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

__version__: str
DEFAULT_BATCH_TOKENS: int

_Text = Union[str, bytes]
_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_F32 = npt.NDArray[np.float32]
_Shape4 = Tuple[int, int, int, int]

class Error(Exception):
    """An error reported by the modattn library."""

    status: int  # the negative modattn_status
    code: str  # its name, e.g. "MODATTN_EINVAL"

class InvalidArgumentError(Error, ValueError): ...
class FormatError(Error, ValueError): ...
class NotFoundError(Error, FileNotFoundError): ...
class OutOfMemoryError(Error, MemoryError): ...
class UnsupportedError(Error): ...
class ModelMismatchError(Error): ...
class InputOutputError(Error, OSError): ...

@final
class Model:
    def __init__(
        self,
        path: _Path,
        device: str = "auto",
        threads: Optional[int] = None,
        precision: str = "fp32",
        backend: str = "auto",
    ) -> None: ...
    @overload
    def encode(  # type: ignore[overload-overlap]  # a str is a sequence of str: the first overload wins
        self,
        texts: _Text,
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        *,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> _F32: ...
    @overload
    def encode(
        self,
        texts: Sequence[_Text],
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        convert_to_numpy: Literal[True] = True,
        *,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> _F32: ...
    @overload
    def encode(
        self,
        texts: Sequence[_Text],
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        *,
        convert_to_numpy: Literal[False],
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> List[_F32]: ...
    @overload
    def encode(
        self,
        texts: Sequence[_Text],
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        *,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> Union[_F32, List[_F32]]: ...
    def encode_query(
        self,
        texts: Union[_Text, Sequence[_Text]],
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        *,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> Union[_F32, List[_F32]]: ...
    def encode_document(
        self,
        texts: Union[_Text, Sequence[_Text]],
        batch_size: int = 32,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        *,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        truncate_dim: Optional[int] = None,
    ) -> Union[_F32, List[_F32]]: ...
    @overload
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...
    @overload
    def decode(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool = ...) -> List[str]: ...
    @overload
    def tokenize(self, texts: _Text) -> List[int]: ...  # type: ignore[overload-overlap]
    @overload
    def tokenize(self, texts: Sequence[_Text]) -> List[List[int]]: ...
    @property
    def dim(self) -> int: ...
    @property
    def max_seq_length(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def normalize(self) -> bool: ...
    @property
    def model_type(self) -> str: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def lower_case(self) -> bool: ...
    @property
    def identity(self) -> str: ...
    @property
    def weights_hash(self) -> str: ...
    @property
    def pooling(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def path(self) -> str: ...

class IndexResult(TypedDict):
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
    highlights: List[Tuple[int, int]]
    found_by: str  # "meaning", "words" or "both": which rankings brought it ("sparse", "meaning+sparse", ... with sparse=)
    sparse_rank: Optional[int]
    sparse_score: Optional[float]
    first_stage_rank: int  # with rerank= only
    first_stage_score: float

@final
class Store:
    def __init__(self, path: _Path, model: Model, readonly: bool = False) -> None: ...
    def index(
        self,
        paths: Union[_Path, Sequence[_Path]],
        progress: bool = True,
        *,
        prune: bool = False,
        chunk_tokens: int = 0,
        overlap: int = -1,
        max_file_size: int = 0,
        file_timeout: float = 30.0,
        sparse: Optional[Union["SparseEncoder", _Path]] = None,
    ) -> IndexResult: ...
    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        path_prefix: Optional[_Path] = None,
        sparse: Optional["SparseEncoder"] = None,
        sparse_weight: float = 0.0,
        rerank: Optional[Union["CrossEncoder", _Path]] = None,
        rerank_top: int = 50,
    ) -> List[SearchHit]: ...
    def counts(self) -> Dict[str, int]: ...
    def sparse_model(self) -> Optional[Dict[str, Any]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Store": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def closed(self) -> bool: ...

_ArrayOrShape = Union[_F32, Sequence[int]]

@overload
def attention(
    q: _F32,
    k: _F32,
    v: _F32,
    *,
    causal: bool = False,
    mask: Optional[npt.NDArray[Any]] = None,
    kv_lens: Optional[Sequence[int]] = None,
    scale: Optional[float] = None,
    return_lse: Literal[False] = False,
    backend: str = "auto",
) -> _F32: ...
@overload
def attention(
    q: _F32,
    k: _F32,
    v: _F32,
    *,
    causal: bool = False,
    mask: Optional[npt.NDArray[Any]] = None,
    kv_lens: Optional[Sequence[int]] = None,
    scale: Optional[float] = None,
    return_lse: Literal[True],
    backend: str = "auto",
) -> Tuple[_F32, _F32]: ...
def explain(
    q: _ArrayOrShape,
    k: _ArrayOrShape,
    v: _ArrayOrShape,
    *,
    causal: bool = False,
    mask: Optional[Union[npt.NDArray[Any], Sequence[int]]] = None,
    kv_lens: Optional[Sequence[int]] = None,
    scale: Optional[float] = None,
    return_lse: bool = False,
    backend: str = "auto",
    device: Optional[str] = None,
) -> str: ...

class CheckResult(TypedDict):
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

def check(
    backend: str, *, configs: Optional[int] = None, seed: Optional[int] = None, device: Optional[str] = None
) -> CheckResult: ...
@overload
def backends(details: Literal[False] = False) -> List[str]: ...
@overload
def backends(details: Literal[True]) -> List[Dict[str, Any]]: ...


class SparseEncoder:
    def __init__(self, model_name_or_path: Union[str, "os.PathLike[str]"], device: str = ..., threads: Optional[int] = ...) -> None: ...
    def encode(self, sentences: Any, batch_size: int = ..., show_progress_bar: Optional[bool] = ...,
               max_active_dims: Optional[int] = ..., threshold: float = ...) -> Any: ...
    def encode_query(self, sentences: Any, **kw: Any) -> Any: ...
    def encode_document(self, sentences: Any, **kw: Any) -> Any: ...
    def decode(self, embeddings: Any, top_k: Optional[int] = ...) -> Any: ...
    @staticmethod
    def similarity(a: Any, b: Any) -> List[List[float]]: ...
    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_seq_length(self) -> int: ...
    @property
    def architecture(self) -> str: ...
    @property
    def pooling(self) -> str: ...
    @property
    def path(self) -> str: ...

class CrossEncoder:
    def __init__(self, model_name_or_path: Union[str, "os.PathLike[str]"], device: str = ..., threads: Optional[int] = ...) -> None: ...
    def predict(self, sentences: Any, batch_size: int = ..., show_progress_bar: Optional[bool] = ..., raw: bool = ...,
                convert_to_numpy: bool = ...) -> Any: ...
    def rank(self, query: str, documents: Sequence[str], top_k: Optional[int] = ..., return_documents: bool = ...,
             batch_size: int = ..., show_progress_bar: Optional[bool] = ..., raw: bool = ...) -> List[Dict[str, Any]]: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def max_length(self) -> int: ...
    @property
    def activation(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def labels(self) -> List[str]: ...
    @property
    def path(self) -> str: ...
