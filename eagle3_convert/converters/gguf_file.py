"""The GGUF container: which file a source names, its header scanned in one streaming pass, the
target's GGUF (`--target-gguf`), a drafter GGUF read as a Checkpoint, and a drafter GGUF written
(gguf's GGUFWriter for the header, the target's tokenizer copied as byte spans, tensors streamed).
The layout's reading and planning are in converters/gguf.py."""

from __future__ import annotations

import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import sidecar as sidecar_mod
from ..target_identity import TargetIdentity
from ..errors import DestinationError, FormatError, RefusalError, UsageError
from ..json_values import is_int
from ..safetensors_io import TensorRef, TensorSource, _inside, iter_tensor_chunks
from .gguf_tensors import CHUNK, ELEMENT

ARCH = "eagle3"
RECORD_KEY = "eagle3_convert.record"  # our canonical config + source dtypes; llama.cpp ignores unknown keys
GGUF_PIN = "gguf==0.19.0"
FILE_TYPE = {"F32": 0, "F16": 1, "BF16": 32}  # llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16
GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30, "I64": 27}
DTYPE_OF_GGML = {v: k for k, v in GGML_TYPE.items()}
ALIGNMENT = 32


def _gguf():
    try:
        import gguf
    except ImportError:
        raise UsageError("reading or writing GGUF needs the `gguf` package",
                         f"pip install 'eagle3-convert[gguf]' (or pip install {GGUF_PIN})",
                         code="E-GGUF-MISSING-PACKAGE") from None
    return gguf


def gguf_file(path: Path) -> Path | None:
    """The GGUF a source path names: a .gguf file, or a directory with exactly one and no config.json."""
    if path.is_file() and path.suffix == ".gguf":
        return path
    if path.is_dir() and not (path / "config.json").exists():
        # _inside: a symlink may lead into an HF cache's blobs/, nowhere else
        found = sorted(p for p in path.glob("*.gguf") if p.is_file() and _inside(path, p))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise FormatError(f"{path} holds {len(found)} GGUF files ({', '.join(p.name for p in found[:3])})",
                              "pass the .gguf file itself", code="E-SRC-AMBIGUOUS")
    return None


@dataclass
class GGUFScan:
    """A GGUF's header read in one streaming pass (the gguf package's GGUFReader turns a 128k-token
    tokenizer into ~1M numpy objects: 600 MB and 10 s; this keeps the tokenizer as byte spans)."""

    path: Path
    version: int
    kv: dict[str, Any]  # every key but tokenizer.*, decoded
    raw: list[tuple[str, int, int]]  # tokenizer.* records: (key, start, end) of the whole record in the file
    tokens: int | None  # entries of tokenizer.ggml.tokens
    tensors: list[tuple[str, tuple[int, ...], int, int]]  # (name, numpy-order shape, ggml type, absolute offset)


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
MAX_KV = 1 << 20  # a GGUF header with more entries than this is hostile, not a model


class HeaderEndsEarly(FormatError):
    """The header runs past the bytes there are: a truncated file, or a prefix fetched by Range too short."""


class _Stream:
    def __init__(self, f: Any, path: Path, size: int):
        self.f, self.path, self.size = f, path, size

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise HeaderEndsEarly(f"{self.path.name}: the GGUF header ends early",
                                  "the file is truncated or not a GGUF", code="E-GGUF-READ")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self, keep: bool = True) -> str | None:
        n = self.unpack("<Q")
        if n > self.size:
            raise FormatError(f"{self.path.name}: a GGUF string of {n} bytes", "the file is damaged",
                              code="E-GGUF-READ")
        if not keep:
            self.f.seek(n, 1)
            return None
        return self.read(n).decode("utf-8", errors="replace")

    def value(self, kind: int, keep: bool) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == STRING:
            return self.string(keep)
        if kind != ARRAY:
            raise FormatError(f"{self.path.name}: unknown GGUF value type {kind}", "the file is damaged",
                              code="E-GGUF-READ")
        sub, count = self.unpack("<I"), self.unpack("<Q")
        if sub in _SCALARS:
            width = struct.calcsize(_SCALARS[sub])
            if count * width > self.size:
                raise FormatError(f"{self.path.name}: a GGUF array of {count} entries", "the file is damaged",
                                  code="E-GGUF-READ")
            if not keep:
                self.f.seek(count * width, 1)
                return count
            return list(struct.unpack(f"<{count}{_SCALARS[sub][1]}", self.read(count * width)))
        if not keep:
            for _ in range(count):
                self.value(sub, False)
            return count
        return [self.value(sub, True) for _ in range(count)]


def scan_gguf(path: Path, what: str, size: int | None = None) -> GGUFScan:
    """Header, keys and tensor infos of a GGUF file; tokenizer values skipped over (their spans kept). `size`: the
    whole file's, where `path` holds only its first bytes (a Hub file read by Range; HeaderEndsEarly: fetch more)."""
    gguf = _gguf()
    try:
        size = path.stat().st_size if size is None else size
        f = open(path, "rb", buffering=1 << 20)
    except OSError as exc:
        raise FormatError(f"{what} {path}: cannot read ({exc.strerror or exc})", "check the path",
                          code="E-GGUF-READ") from None
    with f:
        s = _Stream(f, path, size)
        if s.read(4) != b"GGUF":
            raise FormatError(f"{what} {path} is not a GGUF file", "pass a .gguf written by llama.cpp's tools",
                              code="E-GGUF-READ")
        version = s.unpack("<I")
        if version not in (2, 3):
            raise FormatError(f"{what} {path}: GGUF version {version}", "this tool reads GGUF v3", code="E-GGUF-READ")
        n_tensors, n_kv = s.unpack("<Q"), s.unpack("<Q")
        if n_kv > MAX_KV or n_tensors > MAX_KV:
            raise FormatError(f"{what} {path}: {n_kv} keys, {n_tensors} tensors", "the file is damaged",
                              code="E-GGUF-READ")
        kv: dict[str, Any] = {}
        raw: list[tuple[str, int, int]] = []
        tokens = None
        for _ in range(n_kv):
            begin = f.tell()
            key = s.string()
            kind = s.unpack("<I")
            tokenizer = key.startswith("tokenizer.")
            value = s.value(kind, keep=not tokenizer)
            if tokenizer:
                raw.append((key, begin, f.tell()))
                if key == "tokenizer.ggml.tokens":
                    tokens = value
            else:
                kv[key] = value
        tensors = []
        for _ in range(n_tensors):
            name = s.string()
            n_dims = s.unpack("<I")
            if n_dims > 4:  # GGML_MAX_DIMS
                raise FormatError(f"{what} {path}: tensor {name!r} has {n_dims} dimensions", "the file is damaged",
                                  code="E-GGUF-READ")
            dims = [s.unpack("<Q") for _ in range(n_dims)]
            kind, offset = s.unpack("<I"), s.unpack("<Q")
            tensors.append((name, tuple(reversed(dims)), kind, offset))
        align = kv.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT)
        start = -(-f.tell() // align) * align
    return GGUFScan(path, version, kv, raw, tokens, [(n, sh, k, start + o) for n, sh, k, o in tensors])


@dataclass
class TargetGGUF:
    path: Path
    arch: str  # llama.cpp's architecture name (general.architecture)
    identity: TargetIdentity  # its depth (block_count), width (embedding_length) and vocabulary (its tokens)
    tokenizer: list[tuple[str, int, int]]  # tokenizer.* records as byte spans of `path`, copied verbatim


def read_target_gguf(path: str) -> TargetGGUF:
    """The target's GGUF. Every file that is not one (missing, a folder, another format, a drafter) is bad input:
    E-GGUF-TARGET, exit 1, one message per kind; only leaving --target-gguf out is a usage error (exit 2)."""
    p = Path(path).expanduser()
    if p.is_dir():
        inside = sorted(f.name for f in p.glob("*.gguf") if not f.name.lower().startswith("eagle3-"))[:3]
        raise FormatError(f"--target-gguf {path} is a folder, not a GGUF file",
                          f"pass the target model's .gguf file{f', e.g. {p / inside[0]}' if inside else ''}",
                          code="E-GGUF-TARGET")
    if not p.exists():
        raise FormatError(f"--target-gguf {path}: no such file", "pass the target model's .gguf file",
                          code="E-GGUF-TARGET")
    try:
        scan = scan_gguf(p, "--target-gguf")
    except FormatError as exc:
        raise FormatError(exc.message, "pass the target model's .gguf file", code="E-GGUF-TARGET") from None
    arch = scan.kv.get("general.architecture")
    block_count = scan.kv.get(f"{arch}.block_count")
    width = scan.kv.get(f"{arch}.embedding_length")
    if not isinstance(arch, str) or not is_int(block_count) or not is_int(width) or not scan.tokens:
        raise FormatError(f"--target-gguf {path} lacks general.architecture, its block_count/embedding_length or "
                          "tokenizer.ggml.tokens", "pass the target model's own GGUF (made by llama.cpp's "
                          "convert_hf_to_gguf.py)", code="E-GGUF-TARGET")
    if arch in (ARCH, "dflash"):
        what = "EAGLE-3" if arch == ARCH else "DFlash"
        raise FormatError(f"--target-gguf {path} is an {what} drafter, not a target model",
                          "pass the target model's .gguf file", code="E-GGUF-TARGET")
    return TargetGGUF(p, arch, TargetIdentity(num_hidden_layers=block_count, hidden_size=width,
                                              vocab_size=scan.tokens), scan.raw)


def read_gguf_drafter(root: Path) -> tuple[Path, dict[str, Any], dict[str, TensorSource], list[str],
                                           dict[str, Any] | None]:
    """A GGUF drafter as a Checkpoint's path, config, tensors, files and sidecar: `config` holds its
    non-tokenizer keys (plus `_gguf` facts), tensors its raw byte ranges by GGUF name."""
    gguf = _gguf()
    path = gguf_file(root)
    assert path is not None
    scan = scan_gguf(path, "GGUF")
    config: dict[str, Any] = dict(scan.kv)
    config["_gguf"] = {"file": path.name, "tokenizer_size": scan.tokens}
    tensors: dict[str, TensorSource] = {}
    size = path.stat().st_size
    for name, shape, kind, offset in scan.tensors:
        if kind not in DTYPE_OF_GGML:
            try:
                label = gguf.GGMLQuantizationType(kind).name
            except ValueError:
                label = f"type {kind}"
            raise RefusalError(f"{path.name}: tensor {name} is {label}; this tool reads F32, F16, BF16 and I64 "
                               "GGUFs", "convert from the unquantized GGUF (llama-quantize output cannot be turned "
                               "back into training weights)", code="E-GGUF-DTYPE")
        dtype = DTYPE_OF_GGML[kind]
        nbytes = ELEMENT[dtype] * math.prod(shape)
        if offset + nbytes > size:
            raise FormatError(f"{path.name}: tensor {name} runs past the end of the file", "the file is truncated",
                              code="E-FILE-TRUNCATED")
        if name in tensors:
            raise FormatError(f"{path.name}: tensor {name} appears twice", "the file is damaged", code="E-GGUF-READ")
        tensors[name] = TensorRef(path, name, dtype, shape, offset, offset + nbytes)
    side, trusted = None, False
    if isinstance(record_text := config.get(RECORD_KEY), str):  # trusted when written with this GGUF's own record
        side, trusted = sidecar_mod.read(path.parent, record_text.encode())
    return path, config, tensors, [path.name], side if trusted else None


def file_name(dest: Path, dtype: str) -> str:
    """`eagle3-<name>-<TYPE>.gguf`: the sidecar name llama.cpp's `-hf` download picks beside a target GGUF."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", dest.name).strip("-.") or "drafter"
    stem = re.sub(r"^eagle3-", "", stem, flags=re.IGNORECASE)
    stem = re.sub(r"-(gguf|bf16|f16|f32)$", "", stem, flags=re.IGNORECASE) or "drafter"
    return f"eagle3-{stem}-{dtype}.gguf"


def key_types(metadata: dict[str, Any]) -> dict[str, str]:
    types = {}
    for key, value in metadata.items():
        if isinstance(value, bool):
            types[key] = "bool"
        elif isinstance(value, int):
            types[key] = "uint32"
        elif isinstance(value, float):
            types[key] = "float32"
        elif isinstance(value, list):
            types[key] = "int32[]"
        else:
            types[key] = "string"
    return types


def write_gguf(path: Path, metadata: dict[str, Any], types: dict[str, str], record_text: str, target: TargetGGUF,
                tensors: dict[str, TensorSource], on_progress: Callable[[int], None] | None, arch: str = ARCH) -> None:
    """Header, keys and tensor infos through gguf's GGUFWriter; tensor bytes streamed after them."""
    gguf = _gguf()
    vt = gguf.GGUFValueType
    writer = gguf.GGUFWriter(path, arch)  # adds general.architecture
    for key, value in metadata.items():
        if key == "general.architecture":
            continue
        kind = types[key]
        if kind == "bool":
            writer.add_bool(key, value)
        elif kind == "uint32":
            writer.add_uint32(key, value)
        elif kind == "float32":
            writer.add_float32(key, value)
        elif kind == "int32[]":
            writer.add_key_value(key, list(value), vt.ARRAY, sub_type=vt.INT32)
        else:
            writer.add_string(key, value)
    writer.add_string(RECORD_KEY, record_text)
    ours = len(writer.kv_data[0])
    import numpy as np

    for name, src in tensors.items():
        writer.add_tensor_info(name, tuple(src.shape), np.dtype(np.float32), src.nbytes,
                               raw_dtype=gguf.GGMLQuantizationType(GGML_TYPE[src.dtype]))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        fout = writer.fout[0]
        # The target's tokenizer.* records, byte for byte (streamed: a Llama-3 vocabulary is ~8 MB of records),
        # then the header's KV count (magic, version, n_tensors, n_kv) made to include them.
        with open(target.path, "rb") as tf:
            for _key, begin, end in target.tokenizer:
                tf.seek(begin)
                left = end - begin
                while left:
                    part = tf.read(min(left, CHUNK))
                    if not part:
                        raise FormatError(f"--target-gguf {target.path} changed while copying its tokenizer",
                                          "retry", code="E-GGUF-TARGET")
                    fout.write(part)
                    left -= len(part)
        here = fout.tell()
        fout.seek(16)
        fout.write(struct.pack("<Q", ours + len(target.tokenizer)))
        fout.seek(here)
        writer.write_ti_data_to_file()
        fout.write(b"\0" * (-fout.tell() % ALIGNMENT))
        for name, src in tensors.items():
            written = 0
            for part in iter_tensor_chunks(src):
                fout.write(part)
                written += len(part)
            if written != src.nbytes:
                raise FormatError(f"{name}: {written} bytes streamed, {src.nbytes} expected",
                                  "the source changed while converting", code="E-FILE-TRUNCATED")
            fout.write(b"\0" * (-written % ALIGNMENT))
            if on_progress:
                on_progress(src.nbytes)
        fout.flush()
        os.fsync(fout.fileno())
    except OSError as exc:
        raise DestinationError(f"writing {path.name} failed: {exc.strerror or exc}",
                               "check free space (df -h) and permissions of the destination") from None
    finally:
        writer.close()


