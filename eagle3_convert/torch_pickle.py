"""The restricted pickle machine that reads a torch.save state dict (`data.pkl`) without running code.

Not `pickle`: a small interpreter of its own that knows only the opcodes torch.save writes
(protocol 2) and resolves only these globals — the tensor-rebuild functions of `torch._utils`
(v2, v3, parameter), `collections.OrderedDict`, the typed storage classes and dtypes (as inert
markers, for `persistent_load`). Each resolves to an object of ours that validates its
arguments; nothing of torch or of the pickle's choosing is imported or called. REDUCE calls
only those, BUILD only sets state on an OrderedDict (and we drop it), SETITEM only on dicts
with string or integer keys. That is the allowlist of `torch.load(weights_only=True)`,
narrowed to what a state dict of dense tensors needs. The container around it (the zip, the
storages' byte ranges) is `torch_zip`'s.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from typing import Any, Callable

from .safetensors_io import DTYPE_SIZES

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


class Refused(Exception):
    """A refusal found while reading; the caller adds the file name and the hint its code takes."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------ what the pickle may build


class _Inert:
    """Objects the pickle may name. BUILD never reaches them (it is allowed on OrderedDict only)."""

    __slots__ = ()


class StorageType(_Inert):
    __slots__ = ("name", "dtype", "untyped")

    def __init__(self, name: str, dtype: str | None, untyped: bool = False):
        self.name, self.dtype, self.untyped = name, dtype, untyped


class _DType(_Inert):
    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype


class Storage(_Inert):
    """A storage the pickle loaded: `nbytes` bytes of the file from `data_start`."""

    __slots__ = ("key", "dtype", "data_start", "nbytes")

    def __init__(self, key: str, dtype: str | None, data_start: int, nbytes: int):
        self.key, self.dtype, self.data_start, self.nbytes = key, dtype, data_start, nbytes


class Tensor(_Inert):
    __slots__ = ("storage", "dtype", "shape", "offset")

    def __init__(self, storage: Storage, dtype: str, shape: tuple[int, ...], offset: int):
        self.storage, self.dtype, self.shape, self.offset = storage, dtype, shape, offset


def _is_int(v: object) -> bool:
    return type(v) is int


def _int_tuple(v: object, what: str) -> tuple[int, ...]:
    if type(v) is not tuple or not all(_is_int(x) and x >= 0 for x in v) or len(v) > 64:
        raise Refused("E-BIN-FORMAT", f"a tensor's {what} is not a tuple of non-negative integers")
    return v


def _plain_empty(v: object, what: str) -> None:
    if type(v) not in (dict, OrderedDict) or v:
        raise Refused("E-BIN-FORMAT", f"a tensor carries {what} (torch would attach them as Python state)")


def _tensor(storage: object, offset: object, size: object, stride: object, requires_grad: object,
            hooks: object, dtype: str | None, metadata: object) -> Tensor:
    if type(storage) is not Storage:
        raise Refused("E-BIN-FORMAT", "a tensor is rebuilt from something other than a storage")
    if dtype is None:
        raise Refused("E-BIN-FORMAT", "a tensor is rebuilt from an untyped storage without a dtype")
    if not _is_int(offset) or offset < 0:
        raise Refused("E-BIN-FORMAT", "a tensor's storage offset is not a non-negative integer")
    shape, strides = _int_tuple(size, "shape"), _int_tuple(stride, "stride")
    if len(strides) != len(shape):
        raise Refused("E-BIN-FORMAT", f"a tensor has {len(shape)} dimensions and {len(strides)} strides")
    if type(requires_grad) is not bool:
        raise Refused("E-BIN-FORMAT", "a tensor's requires_grad is not a boolean")
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
                raise Refused("E-BIN-FORMAT", f"a tensor of shape {list(shape)} has strides {list(strides)}, not "
                                              "contiguous (a transposed or strided view)")
            expected *= d
    itemsize = DTYPE_SIZES[dtype]
    if (offset + numel) * itemsize > storage.nbytes:
        raise Refused("E-BIN-FORMAT", f"a tensor of shape {list(shape)} at storage offset {offset} runs past its "
                                      f"{storage.nbytes}-byte storage {storage.key!r}")
    return Tensor(storage, dtype, shape, offset)


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
            return _tensor(*args[:6], getattr(storage, "dtype", None) if type(storage) is Storage else None,
                           args[6] if n == 7 else None)
        elif self.name == "torch._utils._rebuild_tensor_v3" and n in (7, 8):
            dtype = args[6]
            if type(dtype) is not _DType:
                raise Refused("E-BIN-FORMAT", "a tensor's dtype is not a torch dtype")
            storage = args[0]
            if type(storage) is Storage and storage.dtype is not None and storage.dtype != dtype.dtype:
                raise Refused("E-BIN-FORMAT", f"a torch.{dtype.name} tensor views a storage of another dtype")
            return _tensor(*args[:6], dtype.dtype, args[7] if n == 8 else None)
        elif self.name == "torch._utils._rebuild_parameter" and n == 3:
            if type(args[0]) is Tensor and type(args[1]) is bool:
                _plain_empty(args[2], "backward hooks")
                return args[0]
        elif self.name == "torch._utils._rebuild_parameter_with_state" and n == 4:
            if type(args[0]) is Tensor and type(args[1]) is bool:
                _plain_empty(args[2], "backward hooks")
                _plain_empty(args[3], "Python attributes")
                return args[0]
        raise Refused("E-BIN-FORMAT", f"its pickle calls {self.name} with {n} arguments of types "
                                      f"{', '.join(type(a).__name__ for a in args[:8])}, not as torch.save writes it")


_CALLABLES = {name: _Callable(name) for name in (
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state")}


def _resolve_global(module: str, name: str) -> _Inert:
    full = f"{module}.{name}"
    if full in _CALLABLES:
        return _CALLABLES[full]
    if module == "torch" and name in _STORAGE_DTYPES:
        return StorageType(name, _STORAGE_DTYPES[name])
    if module == "torch" and name in _UNSUPPORTED_STORAGES:
        raise Refused("E-FILE-DTYPE", f"holds a torch.{name}, a dtype drafter weights are not stored in")
    if full == "torch.storage.UntypedStorage":
        return StorageType(name, None, untyped=True)
    if module == "torch" and name in _TORCH_DTYPES:
        return _DType(name, _TORCH_DTYPES[name])
    if module == "torch" and name in _UNSUPPORTED_DTYPES:
        raise Refused("E-FILE-DTYPE", f"holds a torch.{name} tensor, a dtype drafter weights are not stored in")
    raise Refused("E-BIN-UNSAFE", f"its pickle calls {full[:120]}, which is not a tensor type")


# ------------------------------------------------------------------ the pickle machine

# The opcodes torch.save (protocol 2) writes; any other is refused, as torch.load(weights_only=True) does.
(MARK, STOP, GLOBAL, REDUCE, BUILD, BINPERSID, EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, APPEND, APPENDS, SETITEM,
 SETITEMS, TUPLE, TUPLE1, TUPLE2, TUPLE3, NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, BINFLOAT,
 BINUNICODE, SHORT_BINSTRING, BINGET, LONG_BINGET, BINPUT, LONG_BINPUT, PROTO) = (
    b"(", b".", b"c", b"R", b"b", b"Q", b"}", b"]", b")", b"a", b"e", b"s", b"u", b"t", b"\x85", b"\x86", b"\x87",
    b"N", b"\x88", b"\x89", b"J", b"K", b"M", b"\x8a", b"G", b"X", b"U", b"h", b"j", b"q", b"r", b"\x80")
_MAX_STACK = 1 << 20


class _Unpickler:
    def __init__(self, data: bytes, persistent_load: Callable[[object], Storage]):
        self.data, self.pos = data, 0
        self.persistent_load = persistent_load

    def read(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise Refused("E-BIN-FORMAT", "its pickle ends early (data.pkl truncated?)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def line(self) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + 257)
        if end < 0:
            raise Refused("E-BIN-FORMAT", "its pickle holds an unterminated or overlong global name")
        raw = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise Refused("E-BIN-UNSAFE", f"its pickle names a global that is not ASCII ({raw[:60]!r})") from None

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
                raise Refused("E-BIN-UNSAFE", f"its pickle does {op} on a {type(target).__name__}")
            return target

        def key_of(k: object) -> object:
            if type(k) not in (str, int):  # no tuple keys: hashing a deep tuple recurses in C
                raise Refused("E-BIN-FORMAT", f"its pickle uses a {type(k).__name__} as a dict key")
            return k

        while True:
            if len(stack) + len(marks) > _MAX_STACK:
                raise Refused("E-BIN-FORMAT", "its pickle stacks more objects than a state dict needs")
            op = self.read(1)
            if op == PROTO:
                if self.read(1)[0] > 5:
                    raise Refused("E-BIN-FORMAT", "its pickle declares an unknown protocol")
            elif op == GLOBAL:
                module = self.line()
                stack.append(_resolve_global(module, self.line()))
            elif op == REDUCE:
                args = stack.pop()
                func = stack[-1]
                if type(func) is not _Callable:
                    raise Refused("E-BIN-UNSAFE", f"its pickle calls an object it built itself "
                                                  f"({type(func).__name__.lstrip('_')}: a nested reduce), not an "
                                                  "allowed function")
                if type(args) is not tuple:
                    raise Refused("E-BIN-UNSAFE", "its pickle calls a function with arguments that are not a tuple")
                stack[-1] = func.call(args)
            elif op == BUILD:
                state = stack.pop()
                if type(stack[-1]) is not OrderedDict or type(state) not in (dict, OrderedDict, type(None)):
                    kind = type(stack[-1]).__name__.lstrip("_")
                    raise Refused("E-BIN-UNSAFE", f"its pickle sets the state of a {kind}; only "
                                                  "an OrderedDict's may be set")
                # The state is a state dict's _metadata (module versions): dropped, nothing reads it.
            elif op == BINPERSID:
                stack.append(self.persistent_load(stack.pop()))
            elif op == MARK:
                marks.append(stack)
                stack = []
            elif op == STOP:
                if len(stack) != 1 or marks:
                    raise Refused("E-BIN-FORMAT", "its pickle stops with a malformed stack")
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
                    raise Refused("E-BIN-UNSAFE", f"its pickle appends to a {type(stack[-1]).__name__}")
                stack[-1].append(item)
            elif op == APPENDS:
                items = pop_mark()
                if type(stack[-1]) is not list:
                    raise Refused("E-BIN-UNSAFE", f"its pickle appends to a {type(stack[-1]).__name__}")
                stack[-1].extend(items)
            elif op == SETITEM:
                value, key = stack.pop(), stack.pop()
                dict_target("SETITEM")[key_of(key)] = value
            elif op == SETITEMS:
                items = pop_mark()
                target = dict_target("SETITEMS")
                if len(items) % 2:
                    raise Refused("E-BIN-FORMAT", "its pickle sets a key without a value")
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
                    raise Refused("E-BIN-FORMAT", f"its pickle reads memo slot {index}, never written")
                stack.append(memo[index])
            elif op in (BINPUT, LONG_BINPUT):
                index = self.read(1)[0] if op == BINPUT else struct.unpack("<I", self.read(4))[0]
                memo[index] = stack[-1]
            else:
                raise Refused("E-BIN-UNSAFE", f"its pickle uses opcode {op!r} at byte {self.pos - 1}, which a "
                                              "state dict saved by torch.save never needs")


def unpickle(data: bytes, persistent_load: Callable[[object], Storage]) -> object:
    """Run `data` on the restricted machine; every failure is a `Refused`."""
    try:
        return _Unpickler(data, persistent_load).load()
    except Refused:
        raise
    except (IndexError, KeyError, TypeError, ValueError, UnicodeDecodeError, struct.error, OverflowError,
            RecursionError, MemoryError) as exc:
        raise Refused("E-BIN-FORMAT", f"its pickle is malformed ({type(exc).__name__})") from None
