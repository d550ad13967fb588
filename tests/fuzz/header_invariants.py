"""What the safetensors header reader promises for ANY file: a consistent header or a FormatError.

Shared by the hypothesis tests (tests/test_fuzz_header.py) and the atheris harness
(tests/fuzz/atheris_header.py).
"""

from __future__ import annotations

import struct
from pathlib import Path

from eagle3_convert.errors import FormatError
from eagle3_convert.safetensors_io import DTYPE_SIZES, SafetensorsHeader, read_header, read_tensor_bytes


def check_header(path: Path) -> SafetensorsHeader | None:
    """Read `path`; return the header if accepted (after proving it consistent), None if refused.

    Any exception other than FormatError propagates: that is the bug a fuzzer looks for.
    """
    try:
        header = read_header(path)
    except FormatError as exc:
        assert exc.code.startswith("E-FILE-"), exc.code
        assert exc.hint and "\n" not in exc.message, exc.message
        return None
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    assert header.data_start == 8 + n and header.file_size == len(blob)
    spans = []
    for name, ref in header.tensors.items():
        assert ref.name == name and ref.dtype in DTYPE_SIZES
        assert all(isinstance(d, int) and d >= 0 for d in ref.shape)
        assert header.data_start <= ref.start <= ref.end <= header.file_size, (name, ref)
        assert ref.nbytes == ref.numel * DTYPE_SIZES[ref.dtype], (name, ref)
        if ref.nbytes <= 1 << 16:
            assert read_tensor_bytes(ref) == blob[ref.start:ref.end]
        if ref.nbytes:
            spans.append((ref.start, ref.end))
    spans.sort()
    for (_, end0), (start1, _) in zip(spans, spans[1:]):
        assert start1 >= end0, "overlapping tensors were accepted"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in header.metadata.items())
    return header
