"""Coverage-guided fuzzing of the safetensors header reader with atheris (libFuzzer).

Not collected by pytest (the hypothesis tests in tests/test_fuzz_header.py run in CI). Run:

    pip install atheris
    mkdir -p /tmp/header-corpus && cp examples/tiny-llama-speculators/model.safetensors /tmp/header-corpus/
    python tests/fuzz/atheris_header.py -max_total_time=300 -max_len=8192 /tmp/header-corpus

Every input is written to a file and read with `read_header`: it must be refused with a
FormatError or accepted as a consistent header (tests/fuzz/header_invariants.py); any
other exception is a crash libFuzzer reports with the input that caused it.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports():
    from header_invariants import check_header

# An in-memory file (memfd): nothing is left on disk when libFuzzer exits straight from C.
_FD = os.memfd_create("model.safetensors")
_PATH = Path(f"/proc/self/fd/{_FD}")


def one_input(data: bytes) -> None:
    # Half the inputs get a correct length prefix, so the fuzzer reaches the JSON checks quickly.
    if data[:1] == b"\x00" and len(data) > 3:
        body = data[3:]
        header_length = int.from_bytes(data[1:3], "little") % (len(body) + 1)
        data = struct.pack("<Q", header_length) + body
    os.ftruncate(_FD, 0)
    os.pwrite(_FD, data, 0)
    check_header(_PATH)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
