"""The safetensors reader refuses every malformed header; the writer's output is what safetensors reads."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from conftest import run_cli, tree_digest
from eagle3_convert import safetensors_io as sio
from eagle3_convert.errors import FormatError


def raw_file(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob) if length is None else length) + blob + data)
    return path


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize("header, data, length, code", [
    ({"a": entry()}, b"\0" * 8, 10**9, "E-FILE-HEADER"),               # length over the sane bound
    ({"a": entry()}, b"\0" * 8, 5000, "E-FILE-TRUNCATED"),              # length past the end of the file
    (b"\xff\xfe{}", b"", None, "E-FILE-HEADER"),                          # not UTF-8
    (b"{\"a\": 1, \"a\": 2}", b"", None, "E-FILE-HEADER"),                # duplicate keys
    (b"[1, 2]", b"", None, "E-FILE-HEADER"),                              # not an object
    (b"{not json", b"", None, "E-FILE-HEADER"),
    ({"a": entry(dtype="Q4")}, b"\0" * 8, None, "E-FILE-DTYPE"),
    ({"a": entry(offsets=(-8, 0))}, b"\0" * 8, None, "E-FILE-OFFSETS"),
    ({"a": entry(offsets=(8, 0))}, b"\0" * 8, None, "E-FILE-OFFSETS"),
    ({"a": entry(offsets=(0, 16))}, b"\0" * 8, None, "E-FILE-TRUNCATED"),
    ({"a": entry(shape=(3,))}, b"\0" * 8, None, "E-FILE-OFFSETS"),       # shape disagrees with the span
    ({"a": entry(), "b": entry(offsets=(4, 12))}, b"\0" * 12, None, "E-FILE-OFFSETS"),  # overlap
    ({"a": entry(shape=(-2,))}, b"\0" * 8, None, "E-FILE-HEADER"),
    ({"a": [1, 2]}, b"", None, "E-FILE-HEADER"),
    ({"__metadata__": {"k": 1}}, b"", None, "E-FILE-HEADER"),
])
def test_hostile_headers_are_refused(tmp_path: Path, header, data, length, code):
    path = raw_file(tmp_path / "model.safetensors", header, data, length)
    with pytest.raises(FormatError) as err:
        sio.read_header(path)
    assert err.value.code == code
    assert "\n" not in err.value.message and err.value.hint


def test_too_short_file(tmp_path: Path):
    (tmp_path / "model.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(FormatError, match="too short"):
        sio.read_header(tmp_path / "model.safetensors")


def test_reads_what_safetensors_writes(tmp_path: Path):
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.array([5, 6], dtype=np.int64),
              "mask": np.array([True, False, True])}
    save_file(arrays, tmp_path / "model.safetensors", metadata={"format": "pt"})
    header = sio.read_header(tmp_path / "model.safetensors")
    assert header.metadata == {"format": "pt"}
    assert {n: (t.dtype, t.shape) for n, t in header.tensors.items()} == {
        "w": ("F32", (3, 4)), "ids": ("I64", (2,)), "mask": ("BOOL", (3,))}
    assert sio.read_tensor_bytes(header.tensors["ids"]) == arrays["ids"].tobytes()


def test_written_file_loads_in_safetensors(tmp_path: Path):
    arrays = {"a": np.arange(6, dtype=np.float16).reshape(2, 3), "b": np.arange(5, dtype=np.int64),
              "c": np.ones(3, dtype=np.bool_), "empty": np.zeros((0, 4), dtype=np.float32)}
    save_file(arrays, tmp_path / "src.safetensors")
    refs = sio.read_header(tmp_path / "src.safetensors").tensors
    entries = {"renamed." + n: r for n, r in refs.items()}
    entries["new"] = sio.InMemoryTensor("I32", (2,), struct.pack("<2i", 7, -1))
    sio.write_safetensors(tmp_path / "out.safetensors", entries, {"format": "pt"})
    with safe_open(tmp_path / "out.safetensors", "np") as f:
        assert f.metadata() == {"format": "pt"}
        for name, arr in arrays.items():
            np.testing.assert_array_equal(f.get_tensor("renamed." + name), arr)
        np.testing.assert_array_equal(f.get_tensor("new"), np.array([7, -1], dtype=np.int32))
    # every tensor aligned to its element size, and the data section starts on 8 bytes
    header = sio.read_header(tmp_path / "out.safetensors")
    assert header.data_start % 8 == 0
    for t in header.tensors.values():
        assert (t.start - header.data_start) % sio.DTYPE_SIZES[t.dtype] == 0


def test_buffered_copy_when_copy_file_range_is_unavailable(tmp_path: Path, monkeypatch):
    data = os.urandom(3 * 1024 * 1024 + 5)
    save_file({"x": np.frombuffer(data, dtype=np.uint8)}, tmp_path / "src.safetensors")
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    monkeypatch.setattr(sio, "COPY_CHUNK", 1 << 20)
    sio.write_safetensors(tmp_path / "out.safetensors", sio.read_header(tmp_path / "src.safetensors").tensors)
    out = sio.read_header(tmp_path / "out.safetensors").tensors["x"]
    assert sio.read_tensor_bytes(out) == data


def test_source_truncated_during_copy_is_an_error(tmp_path: Path):
    save_file({"x": np.zeros(1024, dtype=np.float32)}, tmp_path / "src.safetensors")
    ref = sio.read_header(tmp_path / "src.safetensors").tensors["x"]
    os.truncate(tmp_path / "src.safetensors", ref.start + 100)
    with pytest.raises(FormatError, match="ended early"):
        sio.write_safetensors(tmp_path / "out.safetensors", {"x": ref})


def test_shard_index_cannot_leave_the_directory(tmp_path: Path):
    root = tmp_path / "ckpt"
    root.mkdir()
    save_file({"x": np.zeros(2, dtype=np.float32)}, tmp_path / "outside.safetensors")
    for name in ("../outside.safetensors", str(tmp_path / "outside.safetensors")):
        (root / sio.INDEX_NAME).write_text(json.dumps({"weight_map": {"x": name}}))
        with pytest.raises(FormatError) as err:
            sio.read_tensor_table(root)
        assert err.value.code == "E-FILE-PATH"
    (root / "link.safetensors").symlink_to(tmp_path / "outside.safetensors")
    (root / sio.INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "link.safetensors"}}))
    with pytest.raises(FormatError, match="outside the checkpoint"):
        sio.read_tensor_table(root)


def test_shard_index_naming_a_missing_shard(tmp_path: Path):
    (tmp_path / sio.INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(FormatError) as err:
        sio.read_tensor_table(tmp_path)
    assert err.value.code == "E-FILE-MISSING"


def test_truncated_checkpoint_via_cli_leaves_no_output(example_dir: Path, tmp_path: Path):
    weights = example_dir / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    before = tree_digest(example_dir)
    result = run_cli("--to", "sglang", example_dir, tmp_path / "out")
    assert result.exit_code == 1
    assert "E-FILE-TRUNCATED" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and tree_digest(example_dir) == before
