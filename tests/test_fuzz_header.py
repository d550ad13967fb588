"""Property-based fuzzing of the safetensors header reader and the shard-index path checks.

For any file the reader returns a consistent header (every tensor inside the file, sizes
matching shapes, no overlap) or raises FormatError, never another exception. Bounded:
a few hundred examples each, no deadline (CI machines are slow and shared).
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eagle3_convert.errors import FormatError
from eagle3_convert.safetensors_io import DTYPE_SIZES, INDEX_NAME, read_tensor_table
from fuzz.header_invariants import check_header

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

@pytest.fixture(scope="module")
def write(tmp_path_factory):
    """write(blob) -> the path of a file holding exactly `blob` (one file, rewritten per example)."""
    path = tmp_path_factory.mktemp("fuzz-header") / "model.safetensors"

    def write_blob(blob: bytes) -> Path:
        path.write_bytes(blob)
        return path

    return write_blob


def checked(path: Path):
    header = check_header(path)
    event("accepted" if header is not None else "refused")  # --hypothesis-show-statistics shows the mix
    return header


def framed(header: bytes, data: bytes, length: int | None) -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header + data


# ------------------------------------------------------------------ raw bytes

@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes(write, blob: bytes):
    checked(write(blob))


@FUZZ
@given(header=st.binary(max_size=512), data=st.binary(max_size=256),
       length=st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(0, 1024)))
def test_arbitrary_header_bytes_behind_a_length(write, header: bytes, data: bytes, length: int | None):
    checked(write(framed(header, data, length)))


# ------------------------------------------------------------------ structured but wrong JSON

JSON_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12)
DTYPE = st.one_of(st.sampled_from(sorted(DTYPE_SIZES)), st.sampled_from(["Q4_K", "bf16", "", "F4", "BOOL "]),
                  JSON_JUNK)
DIM = st.one_of(st.integers(0, 40), st.integers(-3, 2**64), JSON_JUNK)
SHAPE = st.one_of(st.lists(st.integers(0, 8), max_size=3), st.lists(DIM, max_size=4), JSON_JUNK)
OFFSET = st.one_of(st.integers(0, 600), st.integers(-2**63, 2**65), JSON_JUNK)
OFFSETS = st.one_of(st.tuples(OFFSET, OFFSET).map(list), st.lists(OFFSET, max_size=4), JSON_JUNK)
ENTRY = st.one_of(st.fixed_dictionaries({"dtype": DTYPE, "shape": SHAPE, "data_offsets": OFFSETS}),
                  st.fixed_dictionaries({}, optional={"dtype": DTYPE, "shape": SHAPE, "data_offsets": OFFSETS,
                                                      "extra": JSON_JUNK}),
                  JSON_JUNK)
METADATA = st.one_of(st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3), JSON_JUNK)


@FUZZ
@given(entries=st.dictionaries(st.text(max_size=12), ENTRY, max_size=6), metadata=st.none() | METADATA,
       data=st.binary(max_size=600), length_delta=st.sampled_from([0, 0, 0, -1, 1, 7]))
def test_structured_but_wrong_headers(write, entries: dict, metadata, data: bytes, length_delta: int):
    header = dict(entries)
    if metadata is not None:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    checked(write(framed(raw, data, max(0, len(raw) + length_delta))))


@st.composite
def nearly_valid(draw):
    """A consistent header, then at most one field of one tensor pushed off by a little."""
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True))
    header, offset = {}, 0
    for name in names:
        dtype = draw(st.sampled_from(sorted(DTYPE_SIZES)))
        shape = draw(st.lists(st.integers(0, 6), max_size=3))
        n = DTYPE_SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    victim = draw(st.sampled_from(names))
    field = draw(st.sampled_from(["none", "begin", "end", "shape", "dtype"]))
    delta = draw(st.sampled_from([-8, -1, 1, 2, 64]))
    if field in ("begin", "end"):
        header[victim]["data_offsets"][0 if field == "begin" else 1] += delta
    elif field == "shape":
        header[victim]["shape"] = header[victim]["shape"] + [draw(st.integers(0, 3))]
    elif field == "dtype":
        header[victim]["dtype"] = draw(st.sampled_from(sorted(DTYPE_SIZES)))
    data_len = max(0, offset + draw(st.sampled_from([0, 0, -1, 1, -offset])))
    return header, data_len


@FUZZ
@given(nearly_valid(), st.binary(min_size=1, max_size=1))
def test_nearly_valid_headers(write, case, fill: bytes):
    header, data_len = case
    raw = json.dumps(header).encode()
    path = write(framed(raw, fill * data_len, None))
    accepted = checked(path)
    if accepted is not None:
        assert set(accepted.tensors) == set(header)


def test_the_generators_reach_acceptance(write):
    """Guard against a fuzzer whose inputs are all refused at the first check: valid ones must pass."""
    raw = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "I8", "shape": [0], "data_offsets": [8, 8]}}).encode()
    header = check_header(write(framed(raw, b"\0" * 8, None)))
    assert header is not None and set(header.tensors) == {"a", "b"}


# ------------------------------------------------------------------ shard index paths

SHARD_NAME = st.one_of(
    st.sampled_from(["model-00001.safetensors", "../outside.safetensors", "/etc/passwd", "a/../../x.safetensors",
                     "..\\x.safetensors", "x\x00.safetensors", "", ".", "..", "sub/../model-00001.safetensors",
                     "link.safetensors"]),
    st.text(max_size=20), JSON_JUNK)


@FUZZ
@given(weight_map=st.one_of(st.dictionaries(st.text(max_size=6), SHARD_NAME, max_size=4), JSON_JUNK))
def test_shard_index_paths(weight_map):
    """Whatever an index names, every tensor returned lies in a file inside the checkpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ckpt"
        root.mkdir()
        shard = json.dumps({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}).encode()
        (root / "model-00001.safetensors").write_bytes(framed(shard, b"\x01", None))
        (Path(tmp) / "outside.safetensors").write_bytes(framed(shard, b"\x02", None))
        (root / "link.safetensors").symlink_to(Path(tmp) / "outside.safetensors")
        (root / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
        try:
            tensors, files = read_tensor_table(root)
        except FormatError as exc:
            assert exc.code.startswith("E-FILE-") and "\n" not in exc.message
            return
        for ref in tensors.values():
            assert ref.file.resolve().is_relative_to(root.resolve()), ref.file
