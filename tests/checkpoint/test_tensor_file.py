"""The streaming safetensors writer: safetensors' own bytes, and the sha256 of what it wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.checkpoint import tensor_file

DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "float16", "int32", "uint32", "float32",
          "float64", "int64", "uint64"]
_name = st.text("abcxyz_.-0123456789", min_size=1, max_size=6)
_shape = st.lists(st.integers(0, 4), max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(specs=st.dictionaries(_name, st.tuples(st.sampled_from(DTYPES), _shape), max_size=6),
       step=st.one_of(st.none(), st.integers(0, 10**9)))
def test_bytes_are_safetensors_own(tmp_path_factory: pytest.TempPathFactory,
                                   specs: dict[str, tuple[str, tuple[int, ...]]],
                                   step: int | None) -> None:
    rng = np.random.default_rng(len(specs))
    tensors = {n: rng.integers(0, 100, shape).astype(dtype) for n, (dtype, shape) in specs.items()}
    metadata = {} if step is None else {"step": str(step)}
    assert tensor_file.can_write(tensors, metadata)
    folder = tmp_path_factory.mktemp("t")
    digest = tensor_file.write(folder / "ours", tensors, metadata)
    safetensors.numpy.save_file(tensors, str(folder / "theirs"), metadata=metadata or None)
    ours = (folder / "ours").read_bytes()
    assert ours == (folder / "theirs").read_bytes()
    assert digest == hashlib.sha256(ours).hexdigest()


def test_blocks_larger_than_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_file, "_BLOCK", 1000)  # many blocks per tensor
    tensors = {"a": np.arange(2_345, dtype=np.float32).reshape(469, 5),
               "b": np.arange(7, dtype=np.int64)[::2]}  # not contiguous
    digest = tensor_file.write(tmp_path / "x", tensors, {"step": "3"})
    assert digest == hashlib.sha256((tmp_path / "x").read_bytes()).hexdigest()
    loaded = safetensors.numpy.load_file(str(tmp_path / "x"))
    assert all(np.array_equal(loaded[n], t) for n, t in tensors.items())


def test_one_hashing_thread_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of many blocks starts one thread, not one per block: where threads or memory are
    scarce each start is a chance for the save to fail."""
    import threading

    started: list[str] = []
    start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(tensor_file, "_BLOCK", 64)
    monkeypatch.setattr(threading.Thread, "start", counted)
    tensors = {"a": np.arange(1000, dtype=np.float32), "b": np.arange(300, dtype=np.int64)}
    digest = tensor_file.write(tmp_path / "t", tensors, {})
    assert len(started) == 1
    assert digest == hashlib.sha256((tmp_path / "t").read_bytes()).hexdigest()


def test_scalar_tensor(tmp_path: Path) -> None:
    tensors = {"s": np.float32(2.5)}
    tensor_file.write(tmp_path / "x", tensors, {})
    safetensors.numpy.save_file({"s": np.asarray(np.float32(2.5))}, str(tmp_path / "y"))
    assert (tmp_path / "x").read_bytes() == (tmp_path / "y").read_bytes()


@pytest.mark.parametrize(("tensors", "metadata"), [
    ({"a": np.zeros(2, ">f4")}, {}),  # big-endian
    ({"a": np.zeros(2, np.complex64)}, {}),  # no safetensors dtype
    ({"a b": np.zeros(2, np.float32)}, {}),  # a name JSON might escape
    ({"a": np.zeros(2, np.float32)}, {"k": "v", "l": "w"}),  # several metadata entries
    ({"a": [1.0, 2.0]}, {}),  # not an array
])
def test_what_it_leaves_to_safetensors(tensors: dict[str, object],
                                       metadata: dict[str, str]) -> None:
    assert not tensor_file.can_write(tensors, metadata)
