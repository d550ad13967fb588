"""safetensors read and write without decoding tensors.

The format is kept visible: 8-byte little-endian header length N, N bytes of JSON
header, then the raw data section. Reading parses and checks the header only; a tensor
is a `TensorRef` (file, byte range, dtype, shape). Writing emits a new header and copies
byte ranges file-to-file (`copy_file_range`, zero-copy where the OS allows, a bounded
buffer otherwise). Only `read_tensor_bytes` brings tensor data into memory, and callers
use it for the small integer/bool vocabulary maps alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .errors import DestinationError, FormatError
from .json_values import is_int
from .writeback import WINDOW, Writeback, write_durably

# Bytes per element, safetensors spelling. Sub-byte float formats are not EAGLE-3 drafter dtypes.
DTYPE_SIZES: dict[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1,
    "BOOL": 1,
}
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0"})
INT_DTYPES = frozenset({"I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8"})

# Same bound as the safetensors library: a header larger than this is hostile, not a model.
MAX_HEADER_BYTES = 100 * 1024 * 1024
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
COPY_CHUNK = 8 * 1024 * 1024

HINT_CORRUPT = "the file is damaged or not safetensors: download or copy it again"


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor's bytes lie: absolute offsets [start, end) in `file`."""

    file: Path
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class InMemoryTensor:
    """A tensor whose value this tool computed (a rebuilt t2d, a re-encoded d2t)."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @property
    def nbytes(self) -> int:
        return len(self.data)


TensorSource = TensorRef | InMemoryTensor


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    tensors: dict[str, TensorRef]
    metadata: dict[str, str]
    data_start: int
    file_size: int
    cut: tuple[str, ...] = ()  # tensors past the end of a truncated file (read with allow_truncated)


def reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """json object_pairs_hook: a repeated key is an attack on whoever reads the other copy."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def open_plain_file(path: str | os.PathLike, display: str) -> int:
    """A read-only fd for a weights file. O_NONBLOCK: a FIFO planted under a weights name must not block
    the open forever; anything but a plain file is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise FormatError(f"{display}: cannot read ({exc.strerror or exc})", "check the path and its permissions",
                          code="E-FILE-READ") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FormatError(f"{display}: not a regular file", "a weights file must be a plain file",
                          code="E-FILE-READ")
    return fd


def read_header(path: str | os.PathLike, allow_truncated: bool = False) -> SafetensorsHeader:
    """Parse and check a safetensors header; read no tensor data.

    With `allow_truncated`, a file cut inside its data section is described instead of refused:
    every tensor the header promises, and in `cut` those whose bytes are not all there."""
    path = Path(path)
    try:
        # O_NONBLOCK: a FIFO planted under a weights name must not block the open forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise FormatError(f"{path}: not a regular file", "a weights file must be a plain file",
                                  code="E-FILE-READ")
            size = st.st_size
            prefix = f.read(8)
            if len(prefix) < 8:
                raise FormatError(f"{path}: {size} bytes, too short for a safetensors header",
                                  HINT_CORRUPT, code="E-FILE-TRUNCATED")
            (n,) = struct.unpack("<Q", prefix)
            if n > MAX_HEADER_BYTES:
                raise FormatError(f"{path}: header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit",
                                  HINT_CORRUPT, code="E-FILE-HEADER")
            if n > size - 8:
                raise FormatError(f"{path}: header length {n} runs past the end of the {size}-byte file",
                                  HINT_CORRUPT, code="E-FILE-TRUNCATED")
            raw = f.read(n)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})",
                          "check the path and its permissions", code="E-FILE-READ") from None
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=reject_duplicate_keys)
    except UnicodeDecodeError:
        raise FormatError(f"{path}: header is not UTF-8", HINT_CORRUPT, code="E-FILE-HEADER") from None
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"{path}: header is not valid JSON ({exc})", HINT_CORRUPT,
                          code="E-FILE-HEADER") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not a JSON object", HINT_CORRUPT, code="E-FILE-HEADER")

    data_start = 8 + n
    data_size = size - data_start
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise FormatError(f"{path}: __metadata__ must map strings to strings", HINT_CORRUPT,
                          code="E-FILE-HEADER")

    tensors: dict[str, TensorRef] = {}
    cut: list[str] = []
    for name, entry in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(entry, dict):
            raise FormatError(f"{where}: entry is not an object", HINT_CORRUPT, code="E-FILE-HEADER")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise FormatError(f"{where}: unknown dtype {dtype!r}", HINT_CORRUPT, code="E-FILE-DTYPE")
        if not isinstance(shape, list) or not all(is_int(d) and d >= 0 for d in shape):
            raise FormatError(f"{where}: shape {shape!r} is not a list of non-negative integers",
                              HINT_CORRUPT, code="E-FILE-HEADER")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(is_int(o) for o in offsets)):
            raise FormatError(f"{where}: data_offsets {offsets!r} is not two integers", HINT_CORRUPT,
                              code="E-FILE-HEADER")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise FormatError(f"{where}: data_offsets {offsets} are negative or reversed", HINT_CORRUPT,
                              code="E-FILE-OFFSETS")
        if end > data_size and allow_truncated:
            cut.append(name)
        elif end > data_size:
            raise FormatError(
                f"{where}: data ends at byte {end} but the file holds {data_size} data bytes (truncated?)",
                HINT_CORRUPT, code="E-FILE-TRUNCATED")
        numel = 1
        for d in shape:
            numel *= d
        if numel * DTYPE_SIZES[dtype] != end - begin:
            raise FormatError(
                f"{where}: shape {shape} of {dtype} needs {numel * DTYPE_SIZES[dtype]} bytes, "
                f"data_offsets span {end - begin}", HINT_CORRUPT, code="E-FILE-OFFSETS")
        tensors[name] = TensorRef(path, name, dtype, tuple(shape), data_start + begin, data_start + end)

    spans = sorted((t.start, t.end, t.name) for t in tensors.values() if t.end > t.start)
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            raise FormatError(f"{path}: tensors {n0!r} and {n1!r} overlap", HINT_CORRUPT,
                              code="E-FILE-OFFSETS")
    return SafetensorsHeader(path, tensors, dict(metadata), data_start, size, tuple(cut))


def _inside(root: Path, candidate: Path) -> bool:
    root = root.resolve()
    target = candidate.resolve()
    # A Hugging Face cache snapshot (<repo>/snapshots/<commit>/) holds symlinks into <repo>/blobs/.
    allowed = [root, root.parent.parent / "blobs"] if root.parent.name == "snapshots" else [root]
    return any(target.is_relative_to(base) for base in allowed)


def checked_member(root: Path, relname: str, what: str) -> Path:
    """A file named by a checkpoint (shard index, config) that must stay inside `root`."""
    if not isinstance(relname, str) or not relname or os.path.isabs(relname) or "\\" in relname \
            or ".." in Path(relname).parts or "\x00" in relname:
        raise FormatError(f"{what} names {relname!r}, which is not a plain file inside the checkpoint",
                          "a shard index may only name files in its own directory", code="E-FILE-PATH")
    path = root / relname
    if not _inside(root, path):
        raise FormatError(f"{what} names {relname!r}, which resolves outside the checkpoint directory",
                          "a symlink or path leaves the directory; refusing to follow it", code="E-FILE-PATH")
    return path


def read_index(root: Path, name: str = INDEX_NAME) -> dict[str, str]:
    """weight_map of a shard index (`model.safetensors.index.json`, or the .bin one): tensor name -> file."""
    index_path = root / name
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"), object_pairs_hook=reject_duplicate_keys)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"{name}: cannot be parsed ({exc})",
                          "the shard index is damaged: download the checkpoint again", code="E-FILE-INDEX") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise FormatError(f"{name}: no weight_map of tensor name -> file",
                          "the shard index is damaged: download the checkpoint again", code="E-FILE-INDEX")
    return weight_map


def read_tensor_table(root: str | os.PathLike) -> tuple[dict[str, TensorRef], list[str]]:
    """All tensors of a checkpoint directory (single file or sharded), and the files they came from."""
    root = Path(root)
    if (root / INDEX_NAME).is_file():
        weight_map = read_index(root)
        shard_names = sorted(set(weight_map.values()))
        tensors: dict[str, TensorRef] = {}
        for shard in shard_names:
            path = checked_member(root, shard, INDEX_NAME)
            if not path.is_file():
                raise FormatError(f"{INDEX_NAME} names shard {shard!r}, which is missing",
                                  "download the complete checkpoint (every shard)", code="E-FILE-MISSING")
            for name, ref in read_header(path).tensors.items():
                if weight_map.get(name) != shard:
                    raise FormatError(f"{shard}: tensor {name!r} is not listed for this shard in {INDEX_NAME}",
                                      "the index and shards disagree: re-download or rebuild the index",
                                      code="E-FILE-INDEX")
                tensors[name] = ref
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise FormatError(f"{INDEX_NAME} lists {len(missing)} tensor(s) no shard holds, e.g. {missing[0]!r}",
                              "the index and shards disagree: re-download the checkpoint", code="E-FILE-INDEX")
        return tensors, shard_names
    single = root / SINGLE_NAME
    files = [single] if single.is_file() else sorted(root.glob("*.safetensors"))
    tensors = {}
    for path in files:
        checked_member(root, path.name, "checkpoint directory")
        for name, ref in read_header(path).tensors.items():
            if name in tensors:
                raise FormatError(f"tensor {name!r} appears in two files without an index",
                                  f"add a {INDEX_NAME} or remove the stray file", code="E-FILE-INDEX")
            tensors[name] = ref
    return tensors, [p.name for p in files]


# Every read of tensor data goes through this hook so a test can prove what a command reads:
# `observer(ref, whole)` with whole=True when the tensor is materialised in memory at once,
# False when it is streamed in bounded chunks (hashing, deep validation).
_read_observers: list[Callable[[TensorRef, bool], None]] = []


def observe_reads(observer: Callable[[TensorRef, bool], None]) -> Callable[[], None]:
    """Register `observer(ref, whole)` for every tensor read; returns an unregister function."""
    _read_observers.append(observer)
    return lambda: _read_observers.remove(observer)


def read_tensor_bytes(src: TensorSource) -> bytes:
    """The raw little-endian bytes of one tensor (for small tensors: d2t, t2d)."""
    if isinstance(src, InMemoryTensor):
        return src.data
    if hasattr(src, "chunks"):  # a tensor computed while streamed (e.g. GGUF Q/K rows un-permuted)
        return b"".join(bytes(part) for part in src.chunks())
    for observer in list(_read_observers):
        observer(src, True)
    try:
        with open(src.file, "rb") as f:
            f.seek(src.start)
            data = f.read(src.nbytes)
    except OSError as exc:
        raise FormatError(f"{src.file}: cannot read tensor {src.name!r} ({exc.strerror or exc})",
                          "check the file and its permissions", code="E-FILE-READ") from None
    if len(data) != src.nbytes:
        raise FormatError(f"{src.file}: tensor {src.name!r} is cut short (file truncated while reading)",
                          HINT_CORRUPT, code="E-FILE-TRUNCATED")
    return data


def iter_tensor_chunks(src: TensorSource, chunk: int = COPY_CHUNK) -> Iterable[memoryview]:
    """Stream a tensor's bytes in bounded chunks (deep validation, hashing)."""
    if isinstance(src, InMemoryTensor):
        yield memoryview(src.data)
        return
    if hasattr(src, "chunks"):
        yield from src.chunks()
        return
    for observer in list(_read_observers):
        observer(src, False)
    buf = bytearray(min(chunk, max(src.nbytes, 1)))
    view = memoryview(buf)
    with open(src.file, "rb") as f:
        f.seek(src.start)
        left = src.nbytes
        while left:
            n = f.readinto(view[: min(left, len(buf))])
            if not n:
                raise FormatError(f"{src.file}: tensor {src.name!r} is cut short", HINT_CORRUPT,
                                  code="E-FILE-TRUNCATED")
            yield view[:n]
            left -= n


def tensor_sha256(src: TensorSource, chunk: int = COPY_CHUNK) -> str:
    h = hashlib.sha256()
    for part in iter_tensor_chunks(src, chunk):
        h.update(part)
    return h.hexdigest()


# ---------------------------------------------------------------- writing


def _aligned_order(entries: Mapping[str, TensorSource]) -> list[str]:
    # Widest dtypes first keeps every tensor aligned to its element size, as safetensors does.
    return sorted(entries, key=lambda name: (-DTYPE_SIZES[entries[name].dtype], name))


def build_header(entries: Mapping[str, TensorSource], metadata: Mapping[str, str] | None) -> tuple[bytes, list[str]]:
    order = _aligned_order(entries)
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name in order:
        src = entries[name]
        header[name] = {"dtype": src.dtype, "shape": list(src.shape), "data_offsets": [offset, offset + src.nbytes]}
        offset += src.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-(8 + len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw, order


def _copy_range(src_fd: int, dst_fd: int, offset: int, count: int, src_name: str,
                wb: Writeback | None = None) -> None:
    use_cfr = hasattr(os, "copy_file_range")
    buf = None
    step = WINDOW if wb is not None else 1 << 30  # window by window: writeback starts during a large tensor
    while count:
        if use_cfr:
            try:
                n = os.copy_file_range(src_fd, dst_fd, min(count, step), offset)
            except OSError:
                use_cfr = False  # cross-device on older kernels, or unsupported fs: fall back
                continue
        else:
            if buf is None:
                buf = bytearray(min(COPY_CHUNK, count))
            view = memoryview(buf)[: min(len(buf), count)]
            n = os.preadv(src_fd, [view], offset) if hasattr(os, "preadv") else _pread_into(src_fd, view, offset)
            if n:
                _write_all(dst_fd, view[:n])
        if n == 0:
            raise FormatError(f"{src_name}: ended early while copying (truncated during conversion?)",
                              HINT_CORRUPT, code="E-FILE-TRUNCATED")
        offset += n
        count -= n
        if wb is not None:
            wb.advance(n)


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    data = os.pread(fd, len(view), offset)
    view[: len(data)] = data
    return len(data)


def _write_all(fd: int, data: bytes | memoryview, wb: Writeback | None = None) -> None:
    view = memoryview(data)
    total = view.nbytes
    while view:
        n = os.write(fd, view)
        view = view[n:]
    if wb is not None:
        wb.advance(total)


def write_safetensors(
    path: str | os.PathLike,
    entries: Mapping[str, TensorSource],
    metadata: Mapping[str, str] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Write `entries` (name -> source) to `path`, copying referenced byte ranges file to file."""
    header, order = build_header(entries, metadata)
    open_sources: dict[Path, int] = {}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        raise DestinationError(f"cannot create {path}: {exc.strerror or exc}",
                               "check free space and permissions of the destination") from None
    try:
        wb = Writeback(fd)  # the disk writes while we still copy; the fsync below remains the guarantee
        _write_all(fd, header, wb)
        for name in order:
            src = entries[name]
            if isinstance(src, InMemoryTensor):
                _write_all(fd, src.data, wb)
            elif hasattr(src, "chunks"):  # computed in bounded chunks (converters/gguf.py)
                for part in src.chunks():
                    _write_all(fd, part, wb)
            else:
                if src.file not in open_sources:
                    open_sources[src.file] = os.open(src.file, os.O_RDONLY)
                _copy_range(open_sources[src.file], fd, src.start, src.nbytes, str(src.file), wb)
            if on_progress:
                on_progress(src.nbytes)
        os.fsync(fd)
    except OSError as exc:
        raise DestinationError(f"writing {Path(path).name} failed: {exc.strerror or exc}",
                               "check free space (df -h) and permissions of the destination") from None
    finally:
        os.close(fd)
        for sfd in open_sources.values():
            os.close(sfd)


def plan_shards(entries: Mapping[str, TensorSource], max_shard_bytes: int | None) -> list[list[str]]:
    """Group tensor names into shards of at most `max_shard_bytes` (one shard when None)."""
    order = sorted(entries)
    if not max_shard_bytes:
        return [order]
    shards: list[list[str]] = [[]]
    size = 0
    for name in order:
        nbytes = entries[name].nbytes
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def write_tensor_files(
    root: Path,
    entries: Mapping[str, TensorSource],
    metadata: Mapping[str, str] | None = None,
    max_shard_bytes: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Write `model.safetensors`, or shards plus `model.safetensors.index.json`; returns file names."""
    shards = plan_shards(entries, max_shard_bytes)
    if len(shards) == 1:
        write_safetensors(root / SINGLE_NAME, entries, metadata, on_progress)
        return [SINGLE_NAME]
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map: dict[str, str] = {}
    for fname, members in zip(names, shards):
        write_safetensors(root / fname, {m: entries[m] for m in members}, metadata, on_progress)
        weight_map.update({m: fname for m in members})
    total = sum(src.nbytes for src in entries.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    write_durably(root / INDEX_NAME, (json.dumps(index, indent=2) + "\n").encode())
    return names + [INDEX_NAME]
