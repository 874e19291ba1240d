"""Errors are exceptions carrying modattn's message, never a crash."""

import pathlib

import numpy as np
import pytest


def test_missing_model_path(modattn, tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError) as ei:
        modattn.Model(missing)
    assert str(missing) in str(ei.value)
    assert isinstance(ei.value, modattn.NotFoundError) and isinstance(ei.value, modattn.Error)
    assert ei.value.code == "MODATTN_ENOTFOUND"


def test_not_a_model(modattn, tmp_path):
    (tmp_path / "modules.json").write_text("{ not json")
    with pytest.raises(modattn.Error) as ei:
        modattn.Model(str(tmp_path))
    assert str(tmp_path) in str(ei.value)
    # a folder with a config that is not BERT's
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(modattn.Error, match=str(d)):
        modattn.Model(pathlib.Path(d))


def test_model_options(modattn, minilm_path):
    with pytest.raises(ValueError, match=r"precision 'fp16' is not available.*fp32"):
        modattn.Model(minilm_path, precision="fp16")
    with pytest.raises(ValueError, match=r"unknown device 'tpu'"):
        modattn.Model(minilm_path, device="tpu")
    with pytest.raises(ValueError, match=r"no implementation named 'nope'"):
        modattn.Model(minilm_path, backend="nope")
    with pytest.raises(ValueError, match=r"threads=-1"):
        modattn.Model(minilm_path, threads=-1)
    with pytest.raises(TypeError):
        modattn.Model(minilm_path, threads="two")
    m = modattn.Model(minilm_path, threads=1, backend="reference")
    assert m.threads == 1 and m.backend == "reference"
    # any conforming attention implementation gives the same embeddings within float rounding
    a = m.encode(["the same vectors with the reference attention"])
    b = modattn.Model(minilm_path, threads=1).encode(["the same vectors with the reference attention"])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_texts_not_strings(model):
    with pytest.raises(TypeError, match=r"texts\[1\] is int: a text is a str, bytes or bytearray"):
        model.encode(["fine", 3])
    with pytest.raises(TypeError, match=r"texts\[0\] is NoneType: a text is"):
        model.encode([None])
    with pytest.raises(TypeError, match=r"texts must be a text \(str, bytes\) or a list of texts, not int"):
        model.encode(5)
    with pytest.raises(TypeError, match=r"texts\[2\] is float: a text is"):
        model.tokenize(["a", b"b", 1.5])
    # one rule for what a text is (the hardening issue): a dict's keys, a set's items in no
    # order, a bytearray read as its ints were all taken before
    with pytest.raises(TypeError, match=r"not dict"):
        model.encode({"a": 1})
    with pytest.raises(TypeError, match=r"not set"):
        model.encode({"a", "b"})
    one = model.encode("the same text")
    for same in (b"the same text", bytearray(b"the same text")):
        np.testing.assert_array_equal(model.encode(same), one)
        np.testing.assert_array_equal(model.encode([same]), model.encode(["the same text"]))
    assert model.tokenize(bytearray(b"x")) == model.tokenize("x")
    # an ordered iterator of texts is a list of texts
    np.testing.assert_array_equal(model.encode(t for t in ["a", "b"]), model.encode(["a", "b"]))
    with pytest.raises(ValueError, match=r"texts\[0\] cannot be encoded as UTF-8"):
        model.encode(["\udc80 a lone surrogate"])
    with pytest.raises(ValueError, match=r"batch_size=0"):
        model.encode(["x"], batch_size=0)
    with pytest.raises(TypeError):
        model.encode()
    with pytest.raises(TypeError):
        model.encode(["x"], no_such_option=True)
    # still usable afterwards
    assert model.encode(["still fine"]).shape == (1, model.dim)


def test_uninitialised_objects(modattn):
    m = modattn.Model.__new__(modattn.Model)
    with pytest.raises(ValueError, match="not loaded"):
        m.encode(["x"])
    with pytest.raises(ValueError, match="not loaded"):
        _ = m.dim
    s = modattn.Store.__new__(modattn.Store)
    with pytest.raises(ValueError, match="not open"):
        s.search("x")


def test_exception_hierarchy(modattn):
    assert issubclass(modattn.InvalidArgumentError, ValueError)
    assert issubclass(modattn.FormatError, ValueError)
    assert issubclass(modattn.NotFoundError, FileNotFoundError)
    assert issubclass(modattn.OutOfMemoryError, MemoryError)
    assert issubclass(modattn.InputOutputError, OSError)
    for cls in (modattn.InvalidArgumentError, modattn.FormatError, modattn.NotFoundError, modattn.OutOfMemoryError,
                modattn.UnsupportedError, modattn.ModelMismatchError, modattn.InputOutputError):
        assert issubclass(cls, modattn.Error) and cls.__module__ == "modattn"
    assert modattn.__version__ == "0.3.0"


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_forked_child_refuses_parent_model(model):
    """A forked child has none of the model's threads: encode says so instead of hanging."""
    import os

    model.encode(["the parent's threads exist"])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        try:
            model.encode(["in the child"])
            msg = b"no error"
        except RuntimeError as e:
            msg = str(e).encode()
        except BaseException as e:  # noqa: BLE001
            msg = repr(e).encode()
        os.write(w, msg[:1000])
        os._exit(0)
    os.close(w)
    got = os.read(r, 1000).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert "forked process" in got, got
    assert model.encode(["the parent still works"]).shape == (1, model.dim)
