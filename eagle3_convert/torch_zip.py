"""PyTorch zip checkpoints (`torch.save` since torch 1.6) read without torch and without running code.

A torch zip checkpoint is an uncompressed zip archive: `<prefix>/data.pkl`, a pickle of the
state dict, plus one member `<prefix>/data/<key>` per storage holding its raw bytes. This
module reads it the way `safetensors_io` reads safetensors: it parses the container, finds
where every tensor's bytes lie, and returns `TensorRef`s (file, byte range, dtype, shape);
the writer then copies those ranges file to file. No tensor data is read here.

Safety, layer by layer:

- The zip is parsed here, strictly (not with `zipfile`, which tolerates bytes before the
  archive and duplicate names, so that two readers could see two different files): one end
  record at the very end, a central directory that ends where it says, every member stored
  (uncompressed, unencrypted), named inside the archive's one directory, once, with its local
  header agreeing and its bytes inside the file and apart from every other member's.
- `data.pkl` is run by a small pickle machine of our own (`_Unpickler`), not `pickle`: it knows
  only the opcodes `torch.save` writes (protocol 2) and resolves only these globals — the
  tensor-rebuild functions of `torch._utils` (v2, v3, parameter), `collections.OrderedDict`,
  the typed storage classes and dtypes (as inert markers, for `persistent_load`). Each
  resolves to an object of ours that validates its arguments; nothing of torch or of the
  pickle's choosing is imported or called. REDUCE calls only those, BUILD only sets state on
  an OrderedDict (and we drop it), SETITEM only on dicts with string or integer keys. That is
  the allowlist of `torch.load(weights_only=True)`, narrowed to what a state dict of dense
  tensors needs.
- A tensor must be dense and contiguous (row-major strides), of a dtype safetensors has,
  inside its storage; each storage must be exactly as long as its persistent id declares.
- data.pkl must pass its CRC-32. Storages are not checksummed here (that would read every
  byte; torch.load with mmap does not either): `validate --deep` hashes and scans them.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import FormatError
from .safetensors_io import DTYPE_SIZES, TensorRef

# A drafter's data.pkl is a few KB (~150 bytes a tensor); this bounds the memory a hostile pickle can ask for.
MAX_PICKLE_BYTES = 16 * 1024 * 1024
MAX_CENTRAL_DIRECTORY_BYTES = 16 * 1024 * 1024
ZIP_MAGIC = b"PK\x03\x04"

HINT_ZIP = ("the file is damaged or was not written by torch.save: download it again, or ask the publisher "
            "for safetensors")
HINT_UNSAFE = ("only plain tensor pickles are read (what torch.load(weights_only=True) admits, nothing is "
               "executed) — ask the publisher for safetensors")
HINT_STATE_DICT = "save the drafter with torch.save(model.state_dict(), ...), or as safetensors"
HINT_CONTIGUOUS = ("save contiguous tensors: torch.save({k: v.contiguous() for k, v in state_dict.items()}, ...), "
                   "or save as safetensors")

# torch's legacy typed storage classes (`torch.<Name>Storage`) and dtypes (`torch.<name>`), by safetensors dtype.
_STORAGE_DTYPES = {
    "DoubleStorage": "F64", "FloatStorage": "F32", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
    "BoolStorage": "BOOL",
}
_UNSUPPORTED_STORAGES = ("ComplexDoubleStorage", "ComplexFloatStorage", "QInt32Storage", "QInt8Storage",
                         "QUInt2x4Storage", "QUInt4x2Storage", "QUInt8Storage")
_TORCH_DTYPES = {
    "float64": "F64", "double": "F64", "float32": "F32", "float": "F32", "float16": "F16", "half": "F16",
    "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "F8_E8M0",
    "int64": "I64", "long": "I64", "int32": "I32", "int": "I32", "int16": "I16", "short": "I16", "int8": "I8",
    "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
}
_UNSUPPORTED_DTYPES = ("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "float8_e4m3fnuz",
                       "float8_e5m2fnuz", "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
                       *(f"uint{n}" for n in range(1, 8)), *(f"int{n}" for n in range(1, 8)),
                       "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16")


class _Refused(Exception):
    """A refusal found while reading; the caller adds the file name and the hint its code takes."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------ the zip container


@dataclass(frozen=True)
class Member:
    name: str
    header_offset: int
    data_start: int
    size: int
    crc: int

    @property
    def data_end(self) -> int:
        return self.data_start + self.size


_EOCD = struct.Struct("<4s4H2LH")          # end of central directory, 22 bytes
_Z64_LOCATOR = struct.Struct("<4sLQL")     # zip64 end-record locator, 20 bytes
_Z64_EOCD = struct.Struct("<4sQ2H2L4Q")    # zip64 end of central directory, 56 bytes
_CENTRAL = struct.Struct("<4s6H3L5H2L")    # central directory file header, 46 bytes
_LOCAL = struct.Struct("<4s5H3L2H")        # local file header, 30 bytes
_UNSAFE_PART = re.compile(r"^\.{1,2}$|[\x00-\x1f\x7f\\]|^$")  # "", ".", "..", control characters, backslash


def _pread(fd: int, size: int, offset: int) -> bytes:
    out = b""
    while len(out) < size:
        chunk = os.pread(fd, size - len(out), offset + len(out))
        if not chunk:
            break
        out += chunk
    return out


def _zip64_fields(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset a zip64 extra field (id 1) holds for those the header marks 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4:pos + 4 + size]
        if len(body) != size:
            raise _Refused("E-BIN-ZIP", "a member's extra field runs past its end")
        if tag == 1:
            values = [v[0] for v in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            wanted = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF]
            if len(values) < sum(wanted):
                raise _Refused("E-BIN-ZIP", "a member's zip64 field is shorter than its header says")
            it = iter(values)
            usize = next(it) if wanted[0] else usize
            csize = next(it) if wanted[1] else csize
            offset = next(it) if wanted[2] else offset
            return usize, csize, offset
        pos += 4 + size
    if 0xFFFFFFFF in (usize, csize, offset):
        raise _Refused("E-BIN-ZIP", "a member marks its size or offset as zip64 but has no zip64 field")
    return usize, csize, offset


def read_members(fd: int, file_size: int) -> tuple[str, dict[str, Member]]:
    """Parse a torch zip archive's directory strictly: (the archive's directory name, members by name)."""
    if file_size < _EOCD.size:
        raise _Refused("E-BIN-ZIP", f"{file_size} bytes, too short for a zip archive (truncated?)")
    eocd_at = file_size - _EOCD.size
    sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = _EOCD.unpack(_pread(fd, _EOCD.size, eocd_at))
    if sig != b"PK\x05\x06" or comment:
        raise _Refused("E-BIN-ZIP", "no zip end record at the end of the file (truncated, or bytes appended)")
    cd_end = eocd_at
    locator_at = eocd_at - _Z64_LOCATOR.size
    locator = _pread(fd, _Z64_LOCATOR.size, locator_at) if locator_at >= 0 else b""
    if locator[:4] == b"PK\x06\x07":
        _, z_disk, z_offset, z_disks = _Z64_LOCATOR.unpack(locator)
        if z_disk != 0 or z_disks != 1 or z_offset + _Z64_EOCD.size > locator_at:
            raise _Refused("E-BIN-ZIP", "its zip64 end-record locator points outside the file")
        (sig, _, _, _, disk, cd_disk, n_disk, n_total, cd_size, cd_offset) = _Z64_EOCD.unpack(
            _pread(fd, _Z64_EOCD.size, z_offset))
        if sig != b"PK\x06\x06":
            raise _Refused("E-BIN-ZIP", "its zip64 end record is missing where the locator says")
        cd_end = z_offset
    if disk or cd_disk or n_disk != n_total:
        raise _Refused("E-BIN-ZIP", "a multi-disk (split) zip archive")
    if cd_size > MAX_CENTRAL_DIRECTORY_BYTES:
        raise _Refused("E-BIN-ZIP", f"its zip directory declares {cd_size} bytes, over the "
                                    f"{MAX_CENTRAL_DIRECTORY_BYTES}-byte bound")
    if cd_offset + cd_size != cd_end:
        # Bytes before the archive, or a directory that is not where the end record says: readers would disagree.
        raise _Refused("E-BIN-ZIP", f"its zip directory ({cd_size} bytes at {cd_offset}) does not end where the "
                                    f"end record is ({cd_end})")
    if n_total * _CENTRAL.size > cd_size:
        raise _Refused("E-BIN-ZIP", f"its zip directory declares {n_total} members, more than its {cd_size} bytes hold")
    cd = _pread(fd, cd_size, cd_offset)
    if len(cd) != cd_size:
        raise _Refused("E-BIN-ZIP", "the file ends inside its zip directory (truncated?)")

    members: dict[str, Member] = {}
    order: list[str] = []
    pos = 0
    for _ in range(n_total):
        if pos + _CENTRAL.size > cd_size:
            raise _Refused("E-BIN-ZIP", "its zip directory is cut short")
        (sig, _, _, flags, method, _, _, crc, csize, usize, nlen, xlen, clen, disk_start, _, _,
         offset) = _CENTRAL.unpack_from(cd, pos)
        raw_name = cd[pos + 46:pos + 46 + nlen]
        extra = cd[pos + 46 + nlen:pos + 46 + nlen + xlen]
        if sig != b"PK\x01\x02" or pos + 46 + nlen + xlen + clen > cd_size:
            raise _Refused("E-BIN-ZIP", "its zip directory holds a damaged entry")
        pos += 46 + nlen + xlen + clen
        usize, csize, offset = _zip64_fields(extra, usize, csize, offset)
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "ascii")
        except UnicodeDecodeError:
            raise _Refused("E-BIN-ZIP", f"a member name is not text ({raw_name[:40]!r})") from None
        shown = ascii(name[:80])
        if disk_start:
            raise _Refused("E-BIN-ZIP", f"member {shown} lies on another disk of a split archive")
        if flags & 0x41:
            raise _Refused("E-BIN-ZIP", f"member {shown} is encrypted")
        if method != 0 or csize != usize:
            raise _Refused("E-BIN-ZIP", f"member {shown} is compressed (method {method}); torch.save stores every "
                                        "member uncompressed")
        parts = name.split("/")
        if name.startswith("/") or len(parts) < 2 or any(_UNSAFE_PART.search(p) for p in parts):
            raise _Refused("E-BIN-ZIP", f"member name {shown} is not a plain path inside the archive's directory")
        if name in members:
            raise _Refused("E-BIN-ZIP", f"member {shown} appears twice (readers would disagree on which is read)")
        local = _pread(fd, _LOCAL.size, offset)
        if len(local) != _LOCAL.size or local[:4] != b"PK\x03\x04":
            raise _Refused("E-BIN-ZIP", f"member {shown}: no local header at offset {offset}")
        (_, _, _, l_method, _, _, _, _, _, l_nlen, l_xlen) = _LOCAL.unpack(local)
        if l_method != method or _pread(fd, l_nlen, offset + _LOCAL.size) != raw_name:
            raise _Refused("E-BIN-ZIP", f"member {shown}: its local header disagrees with the zip directory")
        member = Member(name, offset, offset + _LOCAL.size + l_nlen + l_xlen, usize, crc)
        if member.data_end > cd_offset:
            raise _Refused("E-BIN-ZIP", f"member {shown} declares {usize} bytes at {member.data_start}, past the "
                                        f"archive's data (which ends at {cd_offset}): truncated, or a false size")
        members[name] = member
        order.append(name)
    if pos != cd_size:
        raise _Refused("E-BIN-ZIP", "its zip directory holds bytes after its last entry")
    spans = sorted((m.header_offset, m.data_end, m.name) for m in members.values())
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            raise _Refused("E-BIN-ZIP", f"members {ascii(n0[:80])} and {ascii(n1[:80])} share bytes (overlapping "
                                        "storages)")
    if not order:
        raise _Refused("E-BIN-ZIP", "an empty zip archive")
    prefix = order[0].split("/", 1)[0]
    stray = next((n for n in order if not n.startswith(prefix + "/")), None)
    if stray is not None:
        raise _Refused("E-BIN-ZIP", f"member {ascii(stray[:80])} lies outside the archive's directory {prefix!r}")
    return prefix, members


# ------------------------------------------------------------------ what the pickle may build


class _Inert:
    """Objects the pickle may name. BUILD never reaches them (it is allowed on OrderedDict only)."""

    __slots__ = ()


class _StorageType(_Inert):
    __slots__ = ("name", "dtype", "untyped")

    def __init__(self, name: str, dtype: str | None, untyped: bool = False):
        self.name, self.dtype, self.untyped = name, dtype, untyped


class _DType(_Inert):
    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype


class _Storage(_Inert):
    __slots__ = ("key", "dtype", "member")

    def __init__(self, key: str, dtype: str | None, member: Member):
        self.key, self.dtype, self.member = key, dtype, member


class _Tensor(_Inert):
    __slots__ = ("storage", "dtype", "shape", "offset")

    def __init__(self, storage: _Storage, dtype: str, shape: tuple[int, ...], offset: int):
        self.storage, self.dtype, self.shape, self.offset = storage, dtype, shape, offset


def _is_int(v: object) -> bool:
    return type(v) is int


def _int_tuple(v: object, what: str) -> tuple[int, ...]:
    if type(v) is not tuple or not all(_is_int(x) and x >= 0 for x in v) or len(v) > 64:
        raise _Refused("E-BIN-FORMAT", f"a tensor's {what} is not a tuple of non-negative integers")
    return v


def _plain_empty(v: object, what: str) -> None:
    if type(v) not in (dict, OrderedDict) or v:
        raise _Refused("E-BIN-FORMAT", f"a tensor carries {what} (torch would attach them as Python state)")


def _tensor(storage: object, offset: object, size: object, stride: object, requires_grad: object,
            hooks: object, dtype: str | None, metadata: object) -> _Tensor:
    if type(storage) is not _Storage:
        raise _Refused("E-BIN-FORMAT", "a tensor is rebuilt from something other than a storage")
    if dtype is None:
        raise _Refused("E-BIN-FORMAT", "a tensor is rebuilt from an untyped storage without a dtype")
    if not _is_int(offset) or offset < 0:
        raise _Refused("E-BIN-FORMAT", "a tensor's storage offset is not a non-negative integer")
    shape, strides = _int_tuple(size, "shape"), _int_tuple(stride, "stride")
    if len(strides) != len(shape):
        raise _Refused("E-BIN-FORMAT", f"a tensor has {len(shape)} dimensions and {len(strides)} strides")
    if type(requires_grad) is not bool:
        raise _Refused("E-BIN-FORMAT", "a tensor's requires_grad is not a boolean")
    _plain_empty(hooks, "backward hooks")
    if metadata is not None:
        _plain_empty(metadata, "Python attributes")
    numel = 1
    for d in shape:
        numel *= d
    if numel:
        expected = 1
        for d, s in zip(reversed(shape), reversed(strides)):
            if d != 1 and s != expected:
                raise _Refused("E-BIN-FORMAT", f"a tensor of shape {list(shape)} has strides {list(strides)}, not "
                                               "contiguous (a transposed or strided view)")
            expected *= d
    itemsize = DTYPE_SIZES[dtype]
    if (offset + numel) * itemsize > storage.member.size:
        raise _Refused("E-BIN-FORMAT", f"a tensor of shape {list(shape)} at storage offset {offset} runs past its "
                                       f"{storage.member.size}-byte storage {storage.key!r}")
    return _Tensor(storage, dtype, shape, offset)


class _Callable(_Inert):
    """A global the pickle may call (REDUCE); `call(args)` validates what it is given."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def call(self, args: tuple) -> object:
        n = len(args)
        if self.name == "collections.OrderedDict":
            if n == 0:  # what torch.save writes; items follow by SETITEMS
                return OrderedDict()
        elif self.name == "torch._utils._rebuild_tensor_v2" and n in (6, 7):
            storage = args[0]
            return _tensor(*args[:6], getattr(storage, "dtype", None) if type(storage) is _Storage else None,
                           args[6] if n == 7 else None)
        elif self.name == "torch._utils._rebuild_tensor_v3" and n in (7, 8):
            dtype = args[6]
            if type(dtype) is not _DType:
                raise _Refused("E-BIN-FORMAT", "a tensor's dtype is not a torch dtype")
            storage = args[0]
            if type(storage) is _Storage and storage.dtype is not None and storage.dtype != dtype.dtype:
                raise _Refused("E-BIN-FORMAT", f"a torch.{dtype.name} tensor views a storage of another dtype")
            return _tensor(*args[:6], dtype.dtype, args[7] if n == 8 else None)
        elif self.name == "torch._utils._rebuild_parameter" and n == 3:
            if type(args[0]) is _Tensor and type(args[1]) is bool:
                _plain_empty(args[2], "backward hooks")
                return args[0]
        elif self.name == "torch._utils._rebuild_parameter_with_state" and n == 4:
            if type(args[0]) is _Tensor and type(args[1]) is bool:
                _plain_empty(args[2], "backward hooks")
                _plain_empty(args[3], "Python attributes")
                return args[0]
        raise _Refused("E-BIN-FORMAT", f"its pickle calls {self.name} with {n} arguments of types "
                                       f"{', '.join(type(a).__name__ for a in args[:8])}, not as torch.save writes it")


_CALLABLES = {name: _Callable(name) for name in (
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state")}


def _resolve_global(module: str, name: str) -> _Inert:
    full = f"{module}.{name}"
    if full in _CALLABLES:
        return _CALLABLES[full]
    if module == "torch" and name in _STORAGE_DTYPES:
        return _StorageType(name, _STORAGE_DTYPES[name])
    if module == "torch" and name in _UNSUPPORTED_STORAGES:
        raise _Refused("E-FILE-DTYPE", f"holds a torch.{name}, a dtype drafter weights are not stored in")
    if full == "torch.storage.UntypedStorage":
        return _StorageType(name, None, untyped=True)
    if module == "torch" and name in _TORCH_DTYPES:
        return _DType(name, _TORCH_DTYPES[name])
    if module == "torch" and name in _UNSUPPORTED_DTYPES:
        raise _Refused("E-FILE-DTYPE", f"holds a torch.{name} tensor, a dtype drafter weights are not stored in")
    raise _Refused("E-BIN-UNSAFE", f"its pickle calls {full[:120]}, which is not a tensor type")


# ------------------------------------------------------------------ the pickle machine

# The opcodes torch.save (protocol 2) writes; any other is refused, as torch.load(weights_only=True) does.
(MARK, STOP, GLOBAL, REDUCE, BUILD, BINPERSID, EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, APPEND, APPENDS, SETITEM,
 SETITEMS, TUPLE, TUPLE1, TUPLE2, TUPLE3, NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, BINFLOAT,
 BINUNICODE, SHORT_BINSTRING, BINGET, LONG_BINGET, BINPUT, LONG_BINPUT, PROTO) = (
    b"(", b".", b"c", b"R", b"b", b"Q", b"}", b"]", b")", b"a", b"e", b"s", b"u", b"t", b"\x85", b"\x86", b"\x87",
    b"N", b"\x88", b"\x89", b"J", b"K", b"M", b"\x8a", b"G", b"X", b"U", b"h", b"j", b"q", b"r", b"\x80")
_MAX_STACK = 1 << 20


class _Unpickler:
    def __init__(self, data: bytes, persistent_load):
        self.data, self.pos = data, 0
        self.persistent_load = persistent_load

    def read(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise _Refused("E-BIN-FORMAT", "its pickle ends early (data.pkl truncated?)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def line(self) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + 257)
        if end < 0:
            raise _Refused("E-BIN-FORMAT", "its pickle holds an unterminated or overlong global name")
        raw = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise _Refused("E-BIN-UNSAFE", f"its pickle names a global that is not ASCII ({raw[:60]!r})") from None

    def load(self) -> object:
        stack: list[Any] = []
        marks: list[list[Any]] = []
        memo: dict[int, Any] = {}

        def pop_mark() -> list[Any]:
            nonlocal stack
            items, stack = stack, marks.pop()
            return items

        def dict_target(op: str) -> dict:
            target = stack[-1]
            if type(target) not in (dict, OrderedDict):
                raise _Refused("E-BIN-UNSAFE", f"its pickle does {op} on a {type(target).__name__}")
            return target

        def key_of(k: object) -> object:
            if type(k) not in (str, int):  # no tuple keys: hashing a deep tuple recurses in C
                raise _Refused("E-BIN-FORMAT", f"its pickle uses a {type(k).__name__} as a dict key")
            return k

        while True:
            if len(stack) + len(marks) > _MAX_STACK:
                raise _Refused("E-BIN-FORMAT", "its pickle stacks more objects than a state dict needs")
            op = self.read(1)
            if op == PROTO:
                if self.read(1)[0] > 5:
                    raise _Refused("E-BIN-FORMAT", "its pickle declares an unknown protocol")
            elif op == GLOBAL:
                module = self.line()
                stack.append(_resolve_global(module, self.line()))
            elif op == REDUCE:
                args = stack.pop()
                func = stack[-1]
                if type(func) is not _Callable:
                    raise _Refused("E-BIN-UNSAFE", f"its pickle calls an object it built itself "
                                                   f"({type(func).__name__.lstrip('_')}: a nested reduce), not an "
                                                   "allowed function")
                if type(args) is not tuple:
                    raise _Refused("E-BIN-UNSAFE", "its pickle calls a function with arguments that are not a tuple")
                stack[-1] = func.call(args)
            elif op == BUILD:
                state = stack.pop()
                if type(stack[-1]) is not OrderedDict or type(state) not in (dict, OrderedDict, type(None)):
                    kind = type(stack[-1]).__name__.lstrip("_")
                    raise _Refused("E-BIN-UNSAFE", f"its pickle sets the state of a {kind}; only "
                                                   "an OrderedDict's may be set")
                # The state is a state dict's _metadata (module versions): dropped, nothing reads it.
            elif op == BINPERSID:
                stack.append(self.persistent_load(stack.pop()))
            elif op == MARK:
                marks.append(stack)
                stack = []
            elif op == STOP:
                if len(stack) != 1 or marks:
                    raise _Refused("E-BIN-FORMAT", "its pickle stops with a malformed stack")
                return stack.pop()
            elif op == EMPTY_DICT:
                stack.append({})
            elif op == EMPTY_LIST:
                stack.append([])
            elif op == EMPTY_TUPLE:
                stack.append(())
            elif op == APPEND:
                item = stack.pop()
                if type(stack[-1]) is not list:
                    raise _Refused("E-BIN-UNSAFE", f"its pickle appends to a {type(stack[-1]).__name__}")
                stack[-1].append(item)
            elif op == APPENDS:
                items = pop_mark()
                if type(stack[-1]) is not list:
                    raise _Refused("E-BIN-UNSAFE", f"its pickle appends to a {type(stack[-1]).__name__}")
                stack[-1].extend(items)
            elif op == SETITEM:
                value, key = stack.pop(), stack.pop()
                dict_target("SETITEM")[key_of(key)] = value
            elif op == SETITEMS:
                items = pop_mark()
                target = dict_target("SETITEMS")
                if len(items) % 2:
                    raise _Refused("E-BIN-FORMAT", "its pickle sets a key without a value")
                for i in range(0, len(items), 2):
                    target[key_of(items[i])] = items[i + 1]
            elif op == TUPLE:
                items = pop_mark()  # before naming `stack`: pop_mark rebinds it
                stack.append(tuple(items))
            elif op == TUPLE1:
                stack[-1] = (stack[-1],)
            elif op == TUPLE2:
                if len(stack) < 2:
                    raise IndexError
                stack[-2:] = [(stack[-2], stack[-1])]
            elif op == TUPLE3:
                if len(stack) < 3:
                    raise IndexError
                stack[-3:] = [(stack[-3], stack[-2], stack[-1])]
            elif op == NONE:
                stack.append(None)
            elif op == NEWTRUE:
                stack.append(True)
            elif op == NEWFALSE:
                stack.append(False)
            elif op == BININT:
                stack.append(struct.unpack("<i", self.read(4))[0])
            elif op == BININT1:
                stack.append(self.read(1)[0])
            elif op == BININT2:
                stack.append(struct.unpack("<H", self.read(2))[0])
            elif op == LONG1:
                stack.append(int.from_bytes(self.read(self.read(1)[0]), "little", signed=True))
            elif op == BINFLOAT:
                stack.append(struct.unpack(">d", self.read(8))[0])
            elif op == BINUNICODE:
                stack.append(self.read(struct.unpack("<I", self.read(4))[0]).decode("utf-8", "surrogatepass"))
            elif op == SHORT_BINSTRING:
                stack.append(self.read(self.read(1)[0]).decode("ascii"))
            elif op in (BINGET, LONG_BINGET):
                index = self.read(1)[0] if op == BINGET else struct.unpack("<I", self.read(4))[0]
                if index not in memo:
                    raise _Refused("E-BIN-FORMAT", f"its pickle reads memo slot {index}, never written")
                stack.append(memo[index])
            elif op in (BINPUT, LONG_BINPUT):
                index = self.read(1)[0] if op == BINPUT else struct.unpack("<I", self.read(4))[0]
                memo[index] = stack[-1]
            else:
                raise _Refused("E-BIN-UNSAFE", f"its pickle uses opcode {op!r} at byte {self.pos - 1}, which a "
                                               "state dict saved by torch.save never needs")


def unpickle(data: bytes, persistent_load) -> object:
    """Run `data` on the restricted machine; every failure is a `_Refused`."""
    try:
        return _Unpickler(data, persistent_load).load()
    except _Refused:
        raise
    except (IndexError, KeyError, TypeError, ValueError, UnicodeDecodeError, struct.error, OverflowError,
            RecursionError, MemoryError) as exc:
        raise _Refused("E-BIN-FORMAT", f"its pickle is malformed ({type(exc).__name__})") from None


# ------------------------------------------------------------------ the checkpoint


_STORAGE_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")


def _state_dict(fd: int, file_size: int) -> tuple[dict[str, _Tensor], str]:
    prefix, members = read_members(fd, file_size)
    pkl = members.get(f"{prefix}/data.pkl")
    if pkl is None:
        raise _Refused("E-BIN-ZIP", f"the archive holds no {prefix}/data.pkl: not a torch.save checkpoint")
    if pkl.size > MAX_PICKLE_BYTES:
        raise _Refused("E-BIN-FORMAT", f"its data.pkl is {pkl.size} bytes, over the {MAX_PICKLE_BYTES}-byte bound "
                                       "for a state dict's pickle")
    byteorder = members.get(f"{prefix}/byteorder")
    if byteorder is not None:
        order = _pread(fd, min(byteorder.size, 16), byteorder.data_start)
        if order != b"little":
            raise _Refused("E-BIN-FORMAT", f"its byte order is {order[:16]!r}, not little-endian (safetensors and "
                                           "every engine are little-endian)")
    data = _pread(fd, pkl.size, pkl.data_start)
    if len(data) != pkl.size or zlib.crc32(data) != pkl.crc:
        raise _Refused("E-BIN-ZIP", "its data.pkl fails its checksum (damaged)")

    storages: dict[str, _Storage] = {}

    def persistent_load(pid: object) -> _Storage:
        if type(pid) is not tuple or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise _Refused("E-BIN-UNSAFE", f"its pickle loads a persistent id that is not a storage "
                                           f"({type(pid).__name__})")
        _, stype, key, location, numel = pid
        if type(stype) is not _StorageType:
            raise _Refused("E-BIN-UNSAFE", f"its pickle loads a storage of type {type(stype).__name__}")
        if type(key) is not str or not _STORAGE_KEY.fullmatch(key):
            shown = ascii(key[:80]) if type(key) is str else f"of type {type(key).__name__}"
            raise _Refused("E-BIN-ZIP", f"its pickle names storage {shown}, not a plain storage key")
        if type(location) is not str or len(location) > 64 or not _is_int(numel) or numel < 0:
            raise _Refused("E-BIN-FORMAT", f"storage {key!r} has a malformed location or size")
        member = members.get(f"{prefix}/data/{key}")
        if member is None:
            raise _Refused("E-BIN-ZIP", f"its pickle names storage {key!r}, which the archive does not hold")
        nbytes = numel * (1 if stype.untyped else DTYPE_SIZES[stype.dtype])
        if nbytes != member.size:
            raise _Refused("E-BIN-ZIP", f"storage {key!r} declares {nbytes} bytes, its record holds {member.size}")
        known = storages.get(key)
        if known is not None:
            if known.dtype != stype.dtype:
                raise _Refused("E-BIN-FORMAT", f"storage {key!r} is loaded as two different types")
            return known
        storages[key] = _Storage(key, stype.dtype, member)
        return storages[key]

    state = unpickle(data, persistent_load)
    if type(state) not in (dict, OrderedDict):
        raise _Refused("E-BIN-FORMAT", f"holds a {type(state).__name__.lstrip('_')}, not a state dict")
    for key, value in state.items():
        if type(key) is not str or type(value) is not _Tensor:
            raise _Refused("E-BIN-FORMAT", f"entry {ascii(key)[:80]} is not a tensor "
                                           f"(a {type(value).__name__.lstrip('_')})")
    return state, prefix


def read_state_dict(path: Path, display: str) -> dict[str, TensorRef]:
    """Every tensor of a torch zip checkpoint as a byte range of `path` (no tensor data is read).

    `display` names the file in errors (the name the checkpoint gives it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise FormatError(f"{display}: cannot read ({exc.strerror or exc})", "check the path and its permissions",
                          code="E-FILE-READ") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{display}: not a regular file", "a weights file must be a plain file",
                              code="E-FILE-READ")
        state, _ = _state_dict(fd, st.st_size)
    except _Refused as exc:
        hint = {"E-BIN-UNSAFE": HINT_UNSAFE, "E-BIN-ZIP": HINT_ZIP,
                "E-FILE-DTYPE": "convert the weights to bf16/fp16/fp32"}.get(exc.code, HINT_STATE_DICT)
        if "contiguous" in exc.message:
            hint = HINT_CONTIGUOUS
        raise FormatError(f"{display}: refused to load ({exc.message})", hint, code=exc.code) from None
    except OSError as exc:
        raise FormatError(f"{display}: cannot read ({exc.strerror or exc})", "check the file and its permissions",
                          code="E-FILE-READ") from None
    finally:
        os.close(fd)
    out: dict[str, TensorRef] = {}
    for name, t in state.items():
        itemsize = DTYPE_SIZES[t.dtype]
        numel = 1
        for d in t.shape:
            numel *= d
        start = t.storage.member.data_start + t.offset * itemsize
        out[name] = TensorRef(path, name, t.dtype, tuple(t.shape), start, start + numel * itemsize)
    return out
