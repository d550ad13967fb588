"""A corpus of hostile checkpoints, built by code from the shipped example drafter.

Each case starts from a valid checkpoint (examples/tiny-llama-speculators, or a sharded
copy of it) and breaks exactly one thing. `HostileCase.build(dest)` writes the checkpoint
at `dest`; a case that needs something OUTSIDE the checkpoint (the file a `../` shard path
or a symlink points at) writes it beside `dest` under a name starting with `dest.name`, so
whoever runs the corpus can hash it too. Pickle payloads, if they ever ran, would create a
file named `MARKER_PREFIX*` in dest's parent directory.

`codes` holds the error codes `convert`, `inspect` and `registry add` may answer with: refused
for the right reason, not merely refused.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "tiny-llama-speculators"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
MARKER_PREFIX = "PWNED"
HUGE_CONFIG_BYTES = 3 * 1024**3  # sparse: no block of it is ever written
DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, nothing can leave this machine


def isolated_env(work: Path) -> dict[str, str]:
    """HOME, TMPDIR, XDG dirs, HF cache and registry inside `work/state` (created); the Hub offline and
    unreachable. Whatever a command writes is then under `work`, where a snapshot sees it."""
    state = work / "state"
    (state / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(state), "TMPDIR": str(state / "tmp"), "XDG_DATA_HOME": str(state / "data"),
        "XDG_CACHE_HOME": str(state / "cache"), "XDG_CONFIG_HOME": str(state / "config"), "HF_HOME": str(state / "hf"),
        "EAGLE3_CONVERT_REGISTRY": str(state / "registry.db"), "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_ENDPOINT": DEAD_ENDPOINT,
    }


def subprocess_env(work: Path) -> dict[str, str]:
    """This process' environment, without Hub tokens, isolated into `work`; `python -m eagle3_convert` imports this
    checkout (the code under test), wherever the package was installed from."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(isolated_env(work))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent),
                                                      os.environ.get("PYTHONPATH")]))
    return env


@dataclass(frozen=True)
class HostileCase:
    name: str
    breaks: str  # the one thing that is wrong, in words
    codes: frozenset[str]  # what convert/inspect must refuse it with
    build: Callable[[Path], None]
    pickle_payload: bool = False  # holds a pickle that would run code if unpickled unsafely


def marker_path(dest: Path) -> Path:
    """The file a pickle payload in `dest` would create if it ever ran."""
    return dest.parent / f"{MARKER_PREFIX}-{dest.name}"


def outside_path(dest: Path, suffix: str) -> Path:
    return dest.parent / f"{dest.name}.outside{suffix}"


# ------------------------------------------------------------- raw safetensors surgery

def split_safetensors(path: Path) -> tuple[dict[str, Any], bytes]:
    """(header as parsed, ordered; data section) of a well-formed file."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_safetensors_raw(path: Path, header: dict[str, Any] | bytes, data: bytes, length: int | None = None) -> None:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


def copy_example(dest: Path) -> None:
    shutil.copytree(EXAMPLE, dest)


def copy_sharded(dest: Path) -> None:
    """The example re-written by eagle3-convert's own writer as three shards plus an index."""
    from eagle3_convert.converters.base import load_checkpoint, write_directory

    ckpt = load_checkpoint(EXAMPLE)
    write_directory(dest, ckpt.config, ckpt.tensors, {}, src=None, force=False, max_shard_bytes=50_000)
    assert json.loads((dest / INDEX).read_text())["weight_map"], "the sharded base must have an index"


def shard_names(dest: Path) -> list[str]:
    return sorted(set(json.loads((dest / INDEX).read_text())["weight_map"].values()))


def truncated_at(offset_of: Callable[[int, int], int]) -> Callable[[Path], None]:
    """Truncate model.safetensors at offset_of(header_length, file_size)."""

    def build(dest: Path) -> None:
        copy_example(dest)
        path = dest / WEIGHTS
        (n,) = struct.unpack("<Q", path.read_bytes()[:8])
        os.truncate(path, offset_of(n, path.stat().st_size))

    return build


def with_header_length(length_of: Callable[[int, int], int]) -> Callable[[Path], None]:
    """Keep header and data, but claim header length length_of(real_length, file_size)."""

    def build(dest: Path) -> None:
        copy_example(dest)
        path = dest / WEIGHTS
        blob = path.read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        path.write_bytes(struct.pack("<Q", length_of(n, len(blob))) + blob[8:])

    return build


def with_raw_header(make: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Replace the JSON header bytes by make(original_bytes), keeping the data section."""

    def build(dest: Path) -> None:
        copy_example(dest)
        path = dest / WEIGHTS
        blob = path.read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        write_safetensors_raw(path, make(blob[8:8 + n]), blob[8 + n:])

    return build


def with_header(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """Parse the header, let `edit` change it in place, write it back before the same data."""

    def build(dest: Path) -> None:
        copy_example(dest)
        header, data = split_safetensors(dest / WEIGHTS)
        edit(header)
        write_safetensors_raw(dest / WEIGHTS, header, data)

    return build


def set_entry(name: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        header[name].update(fields)

    return edit


def _overlap(header: dict[str, Any]) -> None:
    # norm.weight (64 bf16 = 128 bytes) moved onto the last 128 bytes of lm_head.weight: sizes stay right.
    lm_end = header["lm_head.weight"]["data_offsets"][1]
    header["norm.weight"]["data_offsets"] = [lm_end - 128, lm_end]


def _beyond_data(header: dict[str, Any]) -> None:
    begin, end = header["norm.weight"]["data_offsets"]
    header["norm.weight"]["data_offsets"] = [begin + 10**6, end + 10**6]


def _duplicate_key(raw: bytes) -> bytes:
    text = raw.decode().rstrip()
    header = json.loads(text)
    entry = json.dumps(header["norm.weight"])
    return (text[:-1] + f', "norm.weight": {entry}' + "}").encode()


def _non_utf8(raw: bytes) -> bytes:
    at = raw.index(b"lm_head")  # a tensor name: same length, invalid UTF-8
    return raw[:at] + b"\xff\xfe" + raw[at + 2:]


def _drop(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda header: header.pop(name)


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        header[new] = header.pop(old)

    return edit


def _patch_tensor_bytes(name: str, patch: Callable[[bytearray, int, int], None]) -> Callable[[Path], None]:
    """Change a tensor's values in place (header untouched)."""

    def build(dest: Path) -> None:
        copy_example(dest)
        header, data = split_safetensors(dest / WEIGHTS)
        begin, end = header[name]["data_offsets"]
        data = bytearray(data)
        patch(data, begin, end)
        write_safetensors_raw(dest / WEIGHTS, header, bytes(data))

    return build


def _d2t_past_vocab(data: bytearray, begin: int, end: int) -> None:
    struct.pack_into("<q", data, end - 8, 10**9)  # the last draft token maps to target id ~1e9


def _t2d_all_true(data: bytearray, begin: int, end: int) -> None:
    data[begin:end] = b"\x01" * (end - begin)


def _two_files_same_tensor(dest: Path) -> None:
    copy_example(dest)
    shutil.copy(dest / WEIGHTS, dest / "extra.safetensors")
    os.rename(dest / WEIGHTS, dest / "main.safetensors")


def _no_tensors(dest: Path) -> None:
    copy_example(dest)
    write_safetensors_raw(dest / WEIGHTS, {"__metadata__": {"format": "pt"}}, b"")


# --------------------------------------------------------------------- shard index

def with_index(edit: Callable[[Path, dict[str, Any]], None]) -> Callable[[Path], None]:
    """The sharded base with its index edited by edit(dest, index)."""

    def build(dest: Path) -> None:
        copy_sharded(dest)
        index = json.loads((dest / INDEX).read_text())
        edit(dest, index)
        (dest / INDEX).write_text(json.dumps(index))

    return build


def _move_shard_outside(dest: Path, index: dict[str, Any], name_for: Callable[[Path, Path], str]) -> None:
    """Move the first shard beside the checkpoint and point the index at it with name_for(dest, moved)."""
    first = shard_names(dest)[0]
    moved = outside_path(dest, ".safetensors")
    os.rename(dest / first, moved)
    index["weight_map"] = {k: (name_for(dest, moved) if v == first else v) for k, v in index["weight_map"].items()}


def _index_dotdot(dest: Path, index: dict[str, Any]) -> None:
    _move_shard_outside(dest, index, lambda d, moved: f"../{moved.name}")


def _index_absolute(dest: Path, index: dict[str, Any]) -> None:
    _move_shard_outside(dest, index, lambda d, moved: str(moved))


def _index_symlink_out(dest: Path, index: dict[str, Any]) -> None:
    first = shard_names(dest)[0]
    moved = outside_path(dest, ".safetensors")
    os.rename(dest / first, moved)
    os.symlink(moved, dest / first)  # the index is untouched; the shard it names leaves the directory


def _index_nested_dotdot(dest: Path, index: dict[str, Any]) -> None:
    first = shard_names(dest)[0]
    (dest / "sub").mkdir()
    _move_shard_outside(dest, index, lambda d, moved: f"sub/../../{moved.name}")
    assert not (dest / first).exists()


def _index_backslash(dest: Path, index: dict[str, Any]) -> None:
    _move_shard_outside(dest, index, lambda d, moved: f"..\\{moved.name}")


def _index_nul(dest: Path, index: dict[str, Any]) -> None:
    first = shard_names(dest)[0]
    index["weight_map"] = {k: (first + "\x00.txt" if v == first else v) for k, v in index["weight_map"].items()}


def _index_missing_shard(dest: Path, index: dict[str, Any]) -> None:
    os.remove(dest / shard_names(dest)[-1])


def _index_weight_map_list(dest: Path, index: dict[str, Any]) -> None:
    index["weight_map"] = list(index["weight_map"].items())


def _index_values_not_str(dest: Path, index: dict[str, Any]) -> None:
    key = next(iter(index["weight_map"]))
    index["weight_map"][key] = 1


def _index_disagrees(dest: Path, index: dict[str, Any]) -> None:
    # Swap which shard two tensors are listed in: each shard now holds a tensor the index puts elsewhere.
    shards = shard_names(dest)
    wm = index["weight_map"]
    a = next(k for k, v in wm.items() if v == shards[0])
    b = next(k for k, v in wm.items() if v == shards[1])
    wm[a], wm[b] = wm[b], wm[a]


def _index_lists_extra(dest: Path, index: dict[str, Any]) -> None:
    index["weight_map"]["layers.0.self_attn.extra.weight"] = shard_names(dest)[0]


def _index_not_json(dest: Path) -> None:
    copy_sharded(dest)
    (dest / INDEX).write_bytes(b'{"weight_map": {"fc.weight": ')


def _shard_truncated(dest: Path) -> None:
    copy_sharded(dest)
    path = dest / shard_names(dest)[1]
    os.truncate(path, path.stat().st_size - 3)


def _single_symlink_out(dest: Path) -> None:
    copy_example(dest)
    moved = outside_path(dest, ".safetensors")
    os.rename(dest / WEIGHTS, moved)
    os.symlink(moved, dest / WEIGHTS)


def _relative_symlink_out(dest: Path) -> None:
    copy_example(dest)
    moved = outside_path(dest, ".safetensors")
    os.rename(dest / WEIGHTS, moved)
    os.symlink(f"../{moved.name}", dest / WEIGHTS)


def _symlink_to_device(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)
    os.symlink("/dev/zero", dest / WEIGHTS)


def _fifo_weights(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)
    os.mkfifo(dest / WEIGHTS)  # opening it for reading would block forever


def _weights_is_directory(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)
    (dest / WEIGHTS).mkdir()
    (dest / "extra.safetensors").mkdir()


# ------------------------------------------------------------------------- config

def with_config_bytes(make: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def build(dest: Path) -> None:
        copy_example(dest)
        path = dest / "config.json"
        path.write_bytes(make(path.read_bytes()))

    return build


def with_config(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def build(dest: Path) -> None:
        copy_example(dest)
        config = json.loads((dest / "config.json").read_text())
        edit(config)
        (dest / "config.json").write_text(json.dumps(config, indent=2))

    return build


def set_layer_field(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(config: dict[str, Any]) -> None:
        config["transformer_layer_config"][key] = value

    return edit


def set_top_field(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(config: dict[str, Any]) -> None:
        config[key] = value

    return edit


def _huge_vocab_without_t2d(dest: Path) -> None:
    """Nothing but config.json states V: a writer that builds a V-byte t2d mask from it would allocate 1 TB."""
    with_config(set_layer_field("vocab_size", 2**40))(dest)
    header, data = split_safetensors(dest / WEIGHTS)
    del header["t2d"]
    write_safetensors_raw(dest / WEIGHTS, header, data)


def _verifier_name_not_str(config: dict[str, Any]) -> None:
    config["speculators_config"]["verifier"]["name_or_path"] = {"$ref": "#"}


def _huge_sparse_config(dest: Path) -> None:
    copy_example(dest)
    path = dest / "config.json"
    with open(path, "r+b") as f:
        f.truncate(HUGE_CONFIG_BYTES)  # valid JSON first, then ~3 GB of holes
    assert path.stat().st_blocks * 512 < 1024 * 1024, "the huge config must stay sparse"


def _config_missing(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / "config.json")


def _config_is_directory(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / "config.json")
    (dest / "config.json").mkdir()


def _config_fifo(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / "config.json")
    os.mkfifo(dest / "config.json")


def _config_symlink_loop(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / "config.json")
    os.symlink("config.json", dest / "config.json")


# ------------------------------------------------------------------ pickles (.bin)

class _Reduce:
    """Pickles as a call of `func(*args)`: what an attacker's pytorch_model.bin holds."""

    def __init__(self, func: Callable[..., Any], *args: Any):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _torch_zip(data_pkl: bytes, storages: dict[str, bytes] | None = None, *, prefix: str = "archive",
               compressed: tuple[str, ...] = (), extra: tuple[tuple[str, bytes], ...] = (),
               byteorder: bytes = b"little") -> bytes:
    """The zip container torch.save writes (<prefix>/data.pkl, data/<key> per storage, byteorder, version),
    built without torch. `compressed` names members to deflate; `extra` adds members as given."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        warnings.simplefilter("ignore")
        members = [(f"{prefix}/data.pkl", data_pkl), (f"{prefix}/byteorder", byteorder),
                   *((f"{prefix}/data/{key}", data) for key, data in (storages or {}).items()),
                   (f"{prefix}/version", b"3\n"), *extra]
        for name, data in members:  # a duplicate name is a case of its own: no warning about it
            method = zipfile.ZIP_DEFLATED if name in compressed else zipfile.ZIP_STORED
            zf.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data, compress_type=method)
    return buf.getvalue()


# A hand assembler for the pickles torch.save writes (protocol 2), so that each case can break one thing.

def p_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p_str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def p_int(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def p_tuple(items) -> bytes:
    return b"(" + b"".join(items) + b"t"


def p_call(func: bytes, args) -> bytes:
    return func + p_tuple(args) + b"R"


def p_ordered_dict() -> bytes:
    return p_global("collections", "OrderedDict") + b")R"


STORAGE_CLASSES = {"F64": "DoubleStorage", "F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage",
                   "I64": "LongStorage", "I32": "IntStorage", "I16": "ShortStorage", "I8": "CharStorage",
                   "U8": "ByteStorage", "BOOL": "BoolStorage"}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


@dataclass
class BinTensor:
    """One entry of a state dict as torch.save pickles it: a tensor viewing storage `key`."""

    name: str
    dtype: str
    shape: list[int]
    key: str
    numel: int  # of the storage, in elements
    offset: int = 0
    stride: list[int] | None = None  # None: contiguous
    storage_class: str | None = None  # None: the dtype's
    hooks: bytes | None = None  # pickled backward_hooks; None: an empty OrderedDict

    def pickle(self) -> bytes:
        stride = self.stride
        if stride is None:
            stride, step = [], 1
            for d in reversed(self.shape):
                stride.insert(0, step)
                step *= d
        storage = p_tuple([p_str("storage"), p_global("torch", self.storage_class or STORAGE_CLASSES[self.dtype]),
                           p_str(self.key), p_str("cpu"), p_int(self.numel)]) + b"Q"
        return p_call(p_global("torch._utils", "_rebuild_tensor_v2"),
                      [storage, p_int(self.offset), p_tuple(map(p_int, self.shape)), p_tuple(map(p_int, stride)),
                       b"\x89", self.hooks if self.hooks is not None else p_ordered_dict()])


def state_pickle(items: list[tuple[str, bytes]]) -> bytes:
    """An OrderedDict state dict of pickled values, as torch.save(model.state_dict()) writes it."""
    return b"\x80\x02" + p_ordered_dict() + b"(" + b"".join(p_str(k) + v for k, v in items) + b"u."


def example_bin() -> tuple[list[BinTensor], dict[str, bytes]]:
    """The example drafter's tensors as a torch state dict: one storage per tensor, as torch.save writes."""
    header, data = split_safetensors(EXAMPLE / WEIGHTS)
    tensors, storages = [], {}
    for i, (name, entry) in enumerate((n, e) for n, e in header.items() if n != "__metadata__"):
        begin, end = entry["data_offsets"]
        storages[str(i)] = data[begin:end]
        numel = (end - begin) // ITEMSIZE[entry["dtype"]]
        tensors.append(BinTensor(name, entry["dtype"], entry["shape"], str(i), numel))
    return tensors, storages


def example_torch_zip(change: Callable[[list[BinTensor], dict[str, bytes]], Any] | None = None,
                      **zip_options: Any) -> bytes:
    """The example as a torch zip checkpoint, after `change(tensors, storages)` (which may edit them in place)."""
    tensors, storages = example_bin()
    if change is not None:
        change(tensors, storages)
    return _torch_zip(state_pickle([(t.name, t.pickle()) for t in tensors]), storages, **zip_options)


def valid_torch_bin(dest: Path) -> None:
    """The control: the example as a well-formed pytorch_model.bin (beside its config)."""
    _bin_dir(dest, example_torch_zip())


def _edit(index: int, **fields: Any) -> Callable[[list[BinTensor], dict[str, bytes]], None]:
    def change(tensors: list[BinTensor], storages: dict[str, bytes]) -> None:
        for key, value in fields.items():
            setattr(tensors[index], key, value)

    return change


def _first_matrix(tensors: list[BinTensor]) -> BinTensor:
    return next(t for t in tensors if len(t.shape) == 2 and min(t.shape) > 1)


def _transpose_first_matrix(tensors: list[BinTensor], storages: dict[str, bytes]) -> None:
    t = _first_matrix(tensors)
    t.shape, t.stride = t.shape[::-1], [1, t.shape[0]]  # a .t() view: same bytes, column-major


def _share_with_neighbour(tensors: list[BinTensor], storages: dict[str, bytes]) -> None:
    """Tensor 1 views tensor 0's storage from an offset past its end."""
    a, b = tensors[0], tensors[1]
    b.key, b.storage_class, b.dtype, b.numel, b.offset = a.key, a.storage_class, a.dtype, a.numel, a.numel


def _central_entry(blob: bytes, name: str) -> int:
    """Offset of `name`'s central-directory entry in a zip."""
    pos = blob.find(b"PK\x01\x02")
    while pos >= 0:
        nlen = struct.unpack_from("<H", blob, pos + 28)[0]
        if blob[pos + 46:pos + 46 + nlen] == name.encode():
            return pos
        pos = blob.find(b"PK\x01\x02", pos + 46)
    raise KeyError(name)


def patch_central(name: str, **fields: int) -> Callable[[bytes], bytes]:
    """Rewrite fields (flags, method, size, offset) of one member's central-directory entry."""
    where = {"flags": (8, "<H"), "method": (10, "<H"), "size": (20, "<L"), "offset": (42, "<L")}

    def patch(blob: bytes) -> bytes:
        out = bytearray(blob)
        pos = _central_entry(blob, name)
        for field_name, value in fields.items():
            offset, fmt = where[field_name]
            struct.pack_into(fmt, out, pos + offset, value)
            if field_name == "size":  # compressed size too: stored members have both equal
                struct.pack_into("<L", out, pos + 20, value)
                struct.pack_into("<L", out, pos + 24, value)
        return bytes(out)

    return patch


def _member_size(blob: bytes, name: str) -> int:
    return struct.unpack_from("<L", blob, _central_entry(blob, name) + 24)[0]


def torch_bin_case(change: Callable[[list[BinTensor], dict[str, bytes]], Any] | None = None,
                   post: Callable[[bytes], bytes] | None = None, **zip_options: Any) -> Callable[[Path], None]:
    def build(dest: Path) -> None:
        blob = example_torch_zip(change, **zip_options)
        _bin_dir(dest, post(blob) if post else blob)

    return build


def _zip_without_pickle() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/version", b"3\n")
    return buf.getvalue()


def pickle_case(make: Callable[[Path], bytes]) -> Callable[[Path], None]:
    """A torch zip of the example's storages whose data.pkl is `make(dest)`."""
    def build(dest: Path) -> None:
        _, storages = example_bin()
        _bin_dir(dest, _torch_zip(make(dest), storages))

    return build


def _shell_marker(dest: Path) -> str:
    return f": > '{marker_path(dest)}'"


def payload_eval(dest: Path) -> bytes:
    return pickle.dumps({"fc.weight": _Reduce(eval, f"open({str(marker_path(dest))!r}, 'w').close()")}, protocol=2)


def payload_exec(dest: Path) -> bytes:
    return pickle.dumps({"fc.weight": _Reduce(exec, f"open({str(marker_path(dest))!r}, 'w').close()")}, protocol=2)


def payload_nested(dest: Path) -> bytes:
    """A well-formed tensor whose backward_hooks argument is os.system(...): code inside an allowed call."""
    tensors, _ = example_bin()
    tensors[0].hooks = p_call(p_global("posix", "system"), [p_str(_shell_marker(dest))])
    return state_pickle([(t.name, t.pickle()) for t in tensors])


def payload_getattr(dest: Path) -> bytes:
    """getattr(__import__('os'), 'system')(cmd): a reduce of the result of a reduce."""
    module = p_call(p_global("builtins", "__import__"), [p_str("os")])
    system = p_call(p_global("builtins", "getattr"), [module, p_str("system")])
    return b"\x80\x02}" + p_str("fc.weight") + system + p_tuple([p_str(_shell_marker(dest))]) + b"Rs."


def payload_stack_global(dest: Path) -> bytes:
    """Protocol 4's STACK_GLOBAL (the global's name taken from the stack) naming posix.system."""
    return (b"\x80\x04}" + p_str("fc.weight") + p_str("posix") + p_str("system") + b"\x93"
            + p_tuple([p_str(_shell_marker(dest))]) + b"Rs.")


def payload_inst(dest: Path) -> bytes:
    """Protocol 0's INST opcode: calls posix.system with the marked arguments."""
    return b"\x80\x02}" + p_str("fc.weight") + b"(" + p_str(_shell_marker(dest)) + b"iposix\nsystem\ns."


def _nested_reduce_of_result(dest: Path) -> bytes:
    """OrderedDict()() : REDUCE on an object the pickle built, not on a global."""
    return b"\x80\x02}" + p_str("fc.weight") + p_ordered_dict() + b")Rs."


def _build_on_tensor(dest: Path) -> bytes:
    tensors, _ = example_bin()
    items = [(t.name, t.pickle()) for t in tensors]
    items[0] = (items[0][0], items[0][1] + b"}" + p_str("offset") + p_int(0) + b"sb")  # BUILD: set its state
    return state_pickle(items)


def _persid_not_storage(dest: Path) -> bytes:
    return b"\x80\x02}" + p_str("fc.weight") + p_tuple([p_str("module"), p_str("os"), p_str("x"), p_str("cpu"),
                                                        p_int(1)]) + b"Qs."


def _torch_load_global(dest: Path) -> bytes:
    """torch.load itself named as a global (a pickle that loads another file unsafely)."""
    return b"\x80\x02}" + p_str("fc.weight") + p_call(p_global("torch", "load"), [p_str("/etc/passwd")]) + b"s."


def _huge_string(dest: Path) -> bytes:
    return b"\x80\x02}X\xff\xff\xff\x7f" + b"fc.weight"


def _deep_tuple_value(dest: Path) -> bytes:
    return b"\x80\x02}" + p_str("fc.weight") + b"(" * 100_000 + b"t" * 100_000 + b"s."


def _deep_tuple_key(dest: Path) -> bytes:
    return b"\x80\x02}" + b"(" * 100_000 + b"t" * 100_000 + p_int(1) + b"s."


def _memo_unset(dest: Path) -> bytes:
    return b"\x80\x02}" + p_str("fc.weight") + b"h\xc8s."


def payload_open(dest: Path) -> bytes:
    """A pickle that creates the marker file with open(path, 'w') when unpickled."""
    return pickle.dumps({"fc.weight": _Reduce(open, str(marker_path(dest)), "w")}, protocol=2)


def payload_system(dest: Path) -> bytes:
    """A pickle that runs a shell command creating the marker file when unpickled."""
    return pickle.dumps({"fc.weight": _Reduce(os.system, f": > '{marker_path(dest)}'")}, protocol=2)


def _bin_dir(dest: Path, blob: bytes, name: str = "pytorch_model.bin") -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)
    (dest / name).write_bytes(blob)


def bin_case(make: Callable[[Path], bytes], name: str = "pytorch_model.bin") -> Callable[[Path], None]:
    return lambda dest: _bin_dir(dest, make(dest), name)


def _bin_index_dotdot(dest: Path) -> None:
    _bin_dir(dest, _torch_zip(pickle.dumps({}, protocol=2)))
    outside = outside_path(dest, ".bin")
    os.rename(dest / "pytorch_model.bin", outside)
    (dest / "pytorch_model-00001-of-00001.bin").write_bytes(b"")
    (dest / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"fc.weight": f"../{outside.name}"}}))


def _mixed_corrupt_safetensors_and_pickle(dest: Path) -> None:
    """A broken model.safetensors beside a code-running .bin: never fall back to the pickle."""
    copy_example(dest)
    os.truncate(dest / WEIGHTS, 100)
    (dest / "pytorch_model.bin").write_bytes(_torch_zip(payload_open(dest)))


def _fifo_bin(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)
    os.mkfifo(dest / "pytorch_model.bin")


# --------------------------------------------------------------------- directories

def _empty_dir(dest: Path) -> None:
    dest.mkdir()


def _config_only(dest: Path) -> None:
    copy_example(dest)
    os.remove(dest / WEIGHTS)


def _src_is_file(dest: Path) -> None:
    shutil.copy(EXAMPLE / WEIGHTS, dest)


def _src_missing(dest: Path) -> None:
    pass


# ----------------------------------------------------------------------- the corpus

TRUNCATED = frozenset({"E-FILE-TRUNCATED"})
HEADER = frozenset({"E-FILE-HEADER"})
OFFSETS = frozenset({"E-FILE-OFFSETS"})
PATH = frozenset({"E-FILE-PATH"})
INDEX_CODES = frozenset({"E-FILE-INDEX"})
CONFIG_JSON = frozenset({"E-CONFIG-JSON"})
CONFIG_FIELD = frozenset({"E-CONFIG-FIELD"})
MISSING = frozenset({"E-SRC-MISSING"})
BIN_UNSAFE = frozenset({"E-BIN-UNSAFE", "E-BIN-TORCH"})  # E-BIN-TORCH: a legacy file, without torch installed
BIN_FORMAT = frozenset({"E-BIN-FORMAT"})
BIN_ZIP = frozenset({"E-BIN-ZIP"})


def _case(name: str, breaks: str, codes: frozenset[str] | str, build: Callable[[Path], None],
          pickle_payload: bool = False) -> HostileCase:
    return HostileCase(name, breaks, frozenset({codes}) if isinstance(codes, str) else codes, build, pickle_payload)


def hostile_cases() -> list[HostileCase]:
    """Every hostile checkpoint, each breaking exactly one thing of a valid one."""
    return [
        # truncation at every region: the 8-byte length, the JSON header, the data section
        _case("trunc-length-0", "weights file is empty", TRUNCATED, truncated_at(lambda n, size: 0)),
        _case("trunc-length-1", "weights cut 1 byte into the length prefix", TRUNCATED, truncated_at(lambda n, s: 1)),
        _case("trunc-length-4", "weights cut inside the length prefix", TRUNCATED, truncated_at(lambda n, s: 4)),
        _case("trunc-length-7", "weights cut just before the end of the length", TRUNCATED,
              truncated_at(lambda n, s: 7)),
        _case("trunc-header-0", "weights end right after the length prefix", TRUNCATED, truncated_at(lambda n, s: 8)),
        _case("trunc-header-1", "weights cut 1 byte into the header", TRUNCATED, truncated_at(lambda n, s: 9)),
        _case("trunc-header-mid", "weights cut in the middle of the header", TRUNCATED,
              truncated_at(lambda n, s: 8 + n // 2)),
        _case("trunc-header-end", "weights cut 1 byte before the end of the header", TRUNCATED,
              truncated_at(lambda n, s: 8 + n - 1)),
        _case("trunc-data-0", "header intact, no data bytes at all", TRUNCATED, truncated_at(lambda n, s: 8 + n)),
        _case("trunc-data-1", "1 data byte", TRUNCATED, truncated_at(lambda n, s: 8 + n + 1)),
        _case("trunc-data-mid", "weights cut in the middle of the data", TRUNCATED,
              truncated_at(lambda n, s: (8 + n + s) // 2)),
        _case("trunc-data-end", "last data byte missing", TRUNCATED, truncated_at(lambda n, s: s - 1)),
        _case("trunc-shard", "second of three shards is 3 bytes short", TRUNCATED, _shard_truncated),
        # the header length
        _case("hdrlen-past-eof", "header length larger than the file", TRUNCATED,
              with_header_length(lambda n, size: size)),
        _case("hdrlen-over-bound", "header length just above the 100 MB sanity bound", HEADER,
              with_header_length(lambda n, size: 100 * 1024 * 1024 + 1)),
        _case("hdrlen-max", "header length 2**64-1", HEADER, with_header_length(lambda n, size: 2**64 - 1)),
        _case("hdrlen-short", "header length cuts the JSON before its closing brace", HEADER,
              with_header_length(lambda n, size: n - 20)),
        _case("hdrlen-zero", "header length 0", HEADER, with_header_length(lambda n, size: 0)),
        # the JSON header
        _case("header-non-utf8", "header bytes are not UTF-8", HEADER, with_raw_header(_non_utf8)),
        _case("header-duplicate-key", "a tensor name appears twice in the header", HEADER,
              with_raw_header(_duplicate_key)),
        _case("header-not-object", "header is a JSON array", HEADER, with_raw_header(lambda raw: b"[1, 2, 3]")),
        _case("header-not-json", "header is not JSON", HEADER, with_raw_header(lambda raw: b"{\"fc.weight\": {dtype")),
        _case("header-deep-nesting", "header nests 100000 arrays deep", HEADER,
              with_raw_header(lambda raw: b"{\"x\": " + b"[" * 100_000 + b"]" * 100_000 + b"}")),
        _case("header-entry-not-object", "a tensor entry is a list", HEADER,
              with_header(lambda h: h.__setitem__("norm.weight", [1, 2]))),
        _case("header-metadata-not-strings", "__metadata__ maps to a number", HEADER,
              with_header(lambda h: h.__setitem__("__metadata__", {"format": 1}))),
        # dtypes
        _case("dtype-unknown", "dtype Q4_K", "E-FILE-DTYPE", with_header(set_entry("norm.weight", dtype="Q4_K"))),
        _case("dtype-lowercase", "dtype bf16 (wrong spelling)", "E-FILE-DTYPE",
              with_header(set_entry("norm.weight", dtype="bf16"))),
        _case("dtype-null", "dtype null", "E-FILE-DTYPE", with_header(set_entry("norm.weight", dtype=None))),
        _case("dtype-object", "dtype is an object", "E-FILE-DTYPE",
              with_header(set_entry("norm.weight", dtype={"__class__": "F32"}))),
        # offsets
        _case("offsets-negative", "data_offsets [-128, 0]", OFFSETS,
              with_header(set_entry("norm.weight", data_offsets=[-128, 0]))),
        _case("offsets-reversed", "data_offsets end before they begin", OFFSETS,
              with_header(lambda h: h["norm.weight"].__setitem__("data_offsets",
                                                                  h["norm.weight"]["data_offsets"][::-1]))),
        _case("offsets-overlap", "two tensors share bytes", OFFSETS, with_header(_overlap)),
        _case("offsets-out-of-range", "a tensor lies past the end of the file", TRUNCATED, with_header(_beyond_data)),
        _case("offsets-huge-int", "data_offsets end at 10**400", TRUNCATED,
              with_header(set_entry("norm.weight", data_offsets=[0, 10**400]))),
        _case("offsets-strings", "data_offsets are strings", HEADER,
              with_header(set_entry("norm.weight", data_offsets=["0", "128"]))),
        _case("offsets-bools", "data_offsets are booleans", HEADER,
              with_header(set_entry("norm.weight", data_offsets=[False, True]))),
        _case("offsets-three", "data_offsets has three numbers", HEADER,
              with_header(set_entry("norm.weight", data_offsets=[0, 64, 128]))),
        _case("offsets-floats", "data_offsets are floats", HEADER,
              with_header(set_entry("norm.weight", data_offsets=[0.0, 128.0]))),
        # shapes
        _case("shape-bytes-mismatch", "shape needs 256 bytes, offsets span 128", OFFSETS,
              with_header(set_entry("norm.weight", shape=[128]))),
        _case("shape-huge", "shape [2**62, 2**62] with a 128-byte span", OFFSETS,
              with_header(set_entry("norm.weight", shape=[2**62, 2**62]))),
        _case("shape-negative", "shape [-64]", HEADER, with_header(set_entry("norm.weight", shape=[-64]))),
        _case("shape-not-list", "shape is a number", HEADER, with_header(set_entry("norm.weight", shape=64))),
        _case("shape-transposed", "down_proj stored [128, 64] (same bytes) where the config implies [64, 128]",
              "E-SHAPE", with_header(set_entry("layers.0.mlp.down_proj.weight", shape=[128, 64]))),
        # tensor sets
        _case("tensor-missing", "fc.weight absent from the header", "E-KEY-MISSING",
              with_header(_drop("fc.weight"))),
        _case("tensor-unknown", "a tensor no EAGLE-3 layout knows", "E-KEY-UNKNOWN",
              with_header(_rename("norm.weight", "backdoor.weight"))),
        _case("tensor-none", "a weights file with no tensors", "E-SRC-EMPTY", _no_tensors),
        _case("tensor-in-two-files", "two safetensors files, no index, the same tensors", INDEX_CODES,
              _two_files_same_tensor),
        _case("d2t-past-vocab", "d2t maps a draft token to target id 1e9",
              frozenset({"E-VOCAB-RANGE", "E-VOCAB-MISMATCH"}), _patch_tensor_bytes("d2t", _d2t_past_vocab)),
        _case("t2d-all-true", "t2d marks every target id", "E-VOCAB-T2D", _patch_tensor_bytes("t2d", _t2d_all_true)),
        _case("d2t-float", "d2t stored as a float tensor", "E-VOCAB-DTYPE",
              with_header(set_entry("d2t", dtype="F64"))),
        # the shard index and paths leaving the directory
        _case("index-dotdot", "shard index names ../outside.safetensors", PATH, with_index(_index_dotdot)),
        _case("index-absolute", "shard index names an absolute path", PATH, with_index(_index_absolute)),
        _case("index-nested-dotdot", "shard index names sub/../../outside.safetensors", PATH,
              with_index(_index_nested_dotdot)),
        _case("index-backslash", "shard index names ..\\outside.safetensors", PATH, with_index(_index_backslash)),
        _case("index-nul", "shard index names a path with a NUL byte", PATH, with_index(_index_nul)),
        _case("index-symlink-out", "a shard is a symlink to a file outside the directory", PATH,
              with_index(_index_symlink_out)),
        _case("index-missing-shard", "shard index names a shard that is not there", "E-FILE-MISSING",
              with_index(_index_missing_shard)),
        _case("index-not-json", "shard index is cut mid-JSON", INDEX_CODES, _index_not_json),
        _case("index-weight-map-list", "weight_map is a list", INDEX_CODES, with_index(_index_weight_map_list)),
        _case("index-values-not-str", "a weight_map value is a number", INDEX_CODES,
              with_index(_index_values_not_str)),
        _case("index-disagrees", "two tensors listed in each other's shard", INDEX_CODES, with_index(_index_disagrees)),
        _case("index-lists-extra", "index lists a tensor no shard holds", INDEX_CODES, with_index(_index_lists_extra)),
        _case("weights-symlink-out", "model.safetensors is an absolute symlink out of the directory", PATH,
              _single_symlink_out),
        _case("weights-symlink-relative-out", "model.safetensors is ../ symlink out of the directory", PATH,
              _relative_symlink_out),
        _case("weights-symlink-device", "model.safetensors is a symlink to /dev/zero", PATH, _symlink_to_device),
        _case("weights-fifo", "model.safetensors is a FIFO (a read would block forever)", "E-FILE-READ",
              _fifo_weights),
        _case("weights-directory", "model.safetensors and extra.safetensors are directories", "E-FILE-READ",
              _weights_is_directory),
        # config.json
        _case("config-array", "config.json is a JSON array", CONFIG_JSON, with_config_bytes(lambda b: b"[1, 2]")),
        _case("config-string", "config.json is a JSON string", CONFIG_JSON, with_config_bytes(lambda b: b'"llama"')),
        _case("config-null", "config.json is null", CONFIG_JSON, with_config_bytes(lambda b: b"null")),
        _case("config-empty", "config.json is empty", CONFIG_JSON, with_config_bytes(lambda b: b"")),
        _case("config-not-json", "config.json is cut mid-object", CONFIG_JSON, with_config_bytes(lambda b: b[:100])),
        _case("config-non-utf8", "config.json is not UTF-8", CONFIG_JSON,
              with_config_bytes(lambda b: b.replace(b"eagle3", b"\xff\xfeagle3", 1))),
        _case("config-duplicate-key", "config.json states hidden_size twice", CONFIG_JSON,
              with_config_bytes(lambda b: b.replace(b'"hidden_size": 64', b'"hidden_size": 64, "hidden_size": 4096'))),
        _case("config-deep-nesting", "config.json nests 100000 arrays deep", CONFIG_JSON,
              with_config_bytes(lambda b: b"{\"x\": " + b"[" * 100_000 + b"]" * 100_000 + b"}")),
        _case("config-huge", "config.json is 3 GB (sparse)", "E-CONFIG-SIZE", _huge_sparse_config),
        _case("config-missing", "no config.json", MISSING, _config_missing),
        _case("config-directory", "config.json is a directory", MISSING, _config_is_directory),
        _case("config-fifo", "config.json is a FIFO", MISSING, _config_fifo),
        _case("config-symlink-loop", "config.json is a symlink to itself", MISSING, _config_symlink_loop),
        _case("config-hidden-size-string", "hidden_size is the string \"64\"", CONFIG_FIELD,
              with_config(set_layer_field("hidden_size", "64"))),
        _case("config-layers-bool", "num_hidden_layers is true", CONFIG_FIELD,
              with_config(set_layer_field("num_hidden_layers", True))),
        _case("config-layers-huge", "num_hidden_layers is 10**9", frozenset({"E-CONFIG-FIELD", "E-KEY-MISSING"}),
              with_config(set_layer_field("num_hidden_layers", 10**9))),
        _case("config-vocab-negative", "vocab_size is -512", CONFIG_FIELD,
              with_config(set_layer_field("vocab_size", -512))),
        _case("config-vocab-huge", "vocab_size is 2**40", frozenset({"E-VOCAB-SHAPE", "E-CONFIG-FIELD"}),
              with_config(set_layer_field("vocab_size", 2**40))),
        _case("config-draft-vocab-string", "draft_vocab_size is \"128\"", CONFIG_FIELD,
              with_config(set_top_field("draft_vocab_size", "128"))),
        _case("config-target-hidden-string", "target_hidden_size is \"64\"", CONFIG_FIELD,
              with_config(set_top_field("target_hidden_size", "64"))),
        _case("config-capture-ids-string", "eagle_aux_hidden_state_layer_ids is \"2,4,5\"", "E-CAPTURE-FIELD",
              with_config(set_top_field("eagle_aux_hidden_state_layer_ids", "2,4,5"))),
        _case("config-capture-ids-bools", "eagle_aux_hidden_state_layer_ids are booleans", "E-CAPTURE-FIELD",
              with_config(set_top_field("eagle_aux_hidden_state_layer_ids", [True, False, True]))),
        _case("config-layer-config-list", "transformer_layer_config is a list", CONFIG_FIELD,
              with_config(set_top_field("transformer_layer_config", [64, 128]))),
        _case("config-model-type-object", "model_type is an object", frozenset({"E-CONFIG-FAMILY", "E-CONFIG-FIELD"}),
              with_config(set_layer_field("model_type", {"llama": True}))),
        _case("config-verifier-name-object", "the verifier's name_or_path is an object", CONFIG_FIELD,
              with_config(_verifier_name_not_str)),
        _case("config-rope-string", "rope_parameters is a string", CONFIG_FIELD,
              with_config(set_layer_field("rope_parameters", "default"))),
        _case("config-eps-string", "rms_norm_eps is a string", CONFIG_FIELD,
              with_config(set_layer_field("rms_norm_eps", "1e-5"))),
        _case("config-no-layout", "config.json of another kind of model", "E-LAYOUT-UNKNOWN",
              with_config_bytes(lambda b: b'{"model_type": "bert", "architectures": ["BertModel"]}')),
        _case("config-kv-heads-string", "num_key_value_heads is the string \"2\"", CONFIG_FIELD,
              with_config(set_layer_field("num_key_value_heads", "2"))),
        _case("config-bias-string", "attention_bias is the string \"false\"", CONFIG_FIELD,
              with_config(set_layer_field("attention_bias", "false"))),
        _case("config-vocab-huge-no-t2d", "vocab_size 2**40 and no t2d to contradict it",
              CONFIG_FIELD, _huge_vocab_without_t2d),
        # pickles: refused by weights_only loading, the payload never runs
        _case("bin-exec-open", "pytorch_model.bin (torch zip) whose pickle calls open(marker, 'w')", BIN_UNSAFE,
              bin_case(lambda d: _torch_zip(payload_open(d))), pickle_payload=True),
        _case("bin-exec-system", "pytorch_model.bin (torch zip) whose pickle calls os.system", BIN_UNSAFE,
              bin_case(lambda d: _torch_zip(payload_system(d))), pickle_payload=True),
        _case("bin-exec-legacy", "pytorch_model.bin as a bare (pre-zip) pickle calling open(marker, 'w')", BIN_UNSAFE,
              bin_case(payload_open), pickle_payload=True),
        _case("bin-exec-shard", "a pytorch_model-00001-of-00001.bin shard whose pickle calls open()", BIN_UNSAFE,
              bin_case(lambda d: _torch_zip(payload_open(d)), "pytorch_model-00001-of-00001.bin"),
              pickle_payload=True),
        _case("bin-garbage", "pytorch_model.bin is random bytes", BIN_UNSAFE | {"E-BIN-FORMAT"},
              bin_case(lambda d: bytes(range(256)) * 64)),
        _case("bin-not-state-dict", "pytorch_model.bin holds a list, not a state dict",
              frozenset({"E-BIN-FORMAT", "E-BIN-TORCH"}), bin_case(lambda d: _torch_zip(pickle.dumps([1, 2], 2)))),
        _case("bin-index-dotdot", "pytorch_model.bin.index.json names ../outside.bin", frozenset({"E-FILE-PATH",
                                                                                                   "E-BIN-TORCH"}),
              _bin_index_dotdot),
        _case("bin-fifo", "pytorch_model.bin is a FIFO", frozenset({"E-FILE-READ", "E-BIN-TORCH"}), _fifo_bin),
        # pickles read without torch: code never runs, nothing but a state dict of dense tensors is built
        _case("bin-exec-eval", "a torch zip whose pickle calls builtins.eval(source creating the marker)", BIN_UNSAFE,
              pickle_case(payload_eval), pickle_payload=True),
        _case("bin-exec-exec", "a torch zip whose pickle calls builtins.exec(source creating the marker)", BIN_UNSAFE,
              pickle_case(payload_exec), pickle_payload=True),
        _case("bin-exec-nested", "a well-formed tensor whose backward_hooks argument is os.system(...)", BIN_UNSAFE,
              pickle_case(payload_nested), pickle_payload=True),
        _case("bin-exec-getattr", "getattr(__import__('os'), 'system')(...): a reduce of a reduce's result",
              BIN_UNSAFE, pickle_case(payload_getattr), pickle_payload=True),
        _case("bin-exec-stack-global", "protocol 4 STACK_GLOBAL naming posix.system", BIN_UNSAFE,
              pickle_case(payload_stack_global), pickle_payload=True),
        _case("bin-exec-inst", "protocol 0 INST opcode calling posix.system", BIN_UNSAFE, pickle_case(payload_inst),
              pickle_payload=True),
        _case("bin-reduce-on-result", "OrderedDict()(): a call of an object the pickle built", BIN_UNSAFE,
              pickle_case(_nested_reduce_of_result)),
        _case("bin-build-on-tensor", "BUILD sets the state of a rebuilt tensor", BIN_UNSAFE,
              pickle_case(_build_on_tensor)),
        _case("bin-persid-not-storage", "a persistent id that is not a storage", BIN_UNSAFE,
              pickle_case(_persid_not_storage)),
        _case("bin-global-torch-load", "a pickle that calls torch.load (a global torch allows no more than we do)",
              BIN_UNSAFE, pickle_case(_torch_load_global)),
        _case("bin-pickle-huge-string", "a pickle string declaring 2 GB in a 20-byte data.pkl", BIN_FORMAT,
              pickle_case(_huge_string)),
        _case("bin-pickle-deep-value", "a value nested 100000 tuples deep", BIN_FORMAT,
              pickle_case(_deep_tuple_value)),
        _case("bin-pickle-deep-key", "a dict key nested 100000 tuples deep (hashing it would recurse in C)",
              BIN_FORMAT, pickle_case(_deep_tuple_key)),
        _case("bin-pickle-memo-unset", "a pickle reads a memo slot it never wrote", BIN_FORMAT,
              pickle_case(_memo_unset)),
        _case("bin-offset-out-of-bounds", "a tensor's storage offset puts it past its storage's end", BIN_FORMAT,
              torch_bin_case(lambda ts, st: setattr(ts[0], "offset", ts[0].numel))),
        _case("bin-offset-negative", "a tensor's storage offset is -1", BIN_FORMAT,
              torch_bin_case(_edit(0, offset=-1))),
        _case("bin-shared-storage-past-end", "two tensors share a storage; the second starts at its end",
              BIN_FORMAT, torch_bin_case(_share_with_neighbour)),
        _case("bin-non-contiguous", "a matrix stored as a transposed (column-major) view", BIN_FORMAT,
              torch_bin_case(_transpose_first_matrix)),
        _case("bin-stride-count", "a matrix with one stride for two dimensions", BIN_FORMAT,
              torch_bin_case(lambda ts, st: setattr(_first_matrix(ts), "stride", [1]))),
        _case("bin-hooks-not-empty", "backward_hooks holds an entry", BIN_FORMAT,
              torch_bin_case(_edit(0, hooks=p_ordered_dict() + p_int(1) + p_int(2) + b"s"))),
        _case("bin-dtype-complex", "a ComplexFloatStorage tensor", "E-FILE-DTYPE",
              torch_bin_case(_edit(0, storage_class="ComplexFloatStorage"))),
        _case("bin-storage-huge-numel", "a storage declaring 2**62 elements", BIN_ZIP,
              torch_bin_case(_edit(0, numel=2**62))),
        _case("bin-storage-key-dotdot", "a storage key ../../etc/passwd", BIN_ZIP,
              torch_bin_case(_edit(0, key="../../etc/passwd"))),
        _case("bin-storage-missing", "a storage key the archive does not hold", BIN_ZIP,
              torch_bin_case(_edit(0, key="999"))),
        _case("bin-member-huge-size", "a storage member declaring 4 GB in a small file", BIN_ZIP,
              torch_bin_case(post=patch_central("archive/data/0", size=0xFFFFFFF0))),
        _case("bin-overlapping-storages", "a storage member's bytes run into the next member", BIN_ZIP,
              torch_bin_case(post=lambda b: patch_central("archive/data/0",
                                                          size=_member_size(b, "archive/data/0") + 200)(b))),
        _case("bin-compressed-storage", "a storage member is deflated", BIN_ZIP,
              torch_bin_case(compressed=("archive/data/0",))),
        _case("bin-compressed-pickle", "data.pkl is deflated", BIN_ZIP,
              torch_bin_case(compressed=("archive/data.pkl",))),
        _case("bin-encrypted-member", "a member flagged encrypted", BIN_ZIP,
              torch_bin_case(post=patch_central("archive/data/1", flags=1))),
        _case("bin-member-dotdot", "a member named archive/../../evil.sh", BIN_ZIP,
              torch_bin_case(extra=(("archive/../../evil.sh", b"touch pwned"),))),
        _case("bin-member-absolute", "a member named /etc/cron.d/evil", BIN_ZIP,
              torch_bin_case(extra=(("/etc/cron.d/evil", b"* * * * * root touch pwned"),))),
        _case("bin-member-outside-prefix", "a member outside the archive's directory", BIN_ZIP,
              torch_bin_case(extra=(("other/data/0", b"x"),))),
        _case("bin-member-duplicate", "archive/data/0 twice (readers would disagree on which is read)", BIN_ZIP,
              torch_bin_case(extra=(("archive/data/0", b"\0" * 8),))),
        _case("bin-no-data-pkl", "a zip without data.pkl", BIN_ZIP,
              bin_case(lambda d: _zip_without_pickle())),
        _case("bin-pickle-checksum", "data.pkl altered after writing (its CRC fails)", BIN_ZIP,
              torch_bin_case(post=lambda b: b.replace(b"fc.weight", b"fc.weighT", 1))),
        _case("bin-big-endian", "byteorder says big", BIN_FORMAT, torch_bin_case(byteorder=b"big")),
        _case("bin-truncated", "a torch zip cut in half", BIN_ZIP, torch_bin_case(post=lambda b: b[: len(b) // 2])),
        _case("bin-appended-bytes", "bytes appended after the zip's end record", BIN_ZIP,
              torch_bin_case(post=lambda b: b + b"appended")),
        _case("bin-prefixed-bytes", "bytes before the zip (zipfile would still open it)",
              frozenset({"E-BIN-FORMAT", "E-BIN-ZIP"}), torch_bin_case(post=lambda b: b"\0" * 64 + b)),
        _case("bin-prefixed-zip", "a zip whose offsets are shifted by a local header put before it", BIN_ZIP,
              torch_bin_case(post=lambda b: b"PK\x03\x04" + b"\0" * 60 + b)),
        _case("bin-zip-empty", "an empty zip archive", BIN_ZIP, bin_case(lambda d: b"PK\x05\x06" + b"\0" * 18)),
        _case("mixed-corrupt-st-and-pickle", "a truncated model.safetensors beside a code-running .bin", TRUNCATED,
              _mixed_corrupt_safetensors_and_pickle, pickle_payload=True),
        # the directory itself
        _case("dir-empty", "an empty directory", MISSING, _empty_dir),
        _case("dir-config-only", "config.json and no weights", MISSING, _config_only),
        _case("src-is-file", "SRC is a file, not a directory", MISSING, _src_is_file),
        _case("src-missing", "SRC does not exist", MISSING, _src_missing),
    ]


def mixed_bin_and_safetensors(dest: Path) -> None:
    """Valid safetensors beside a code-running pytorch_model.bin: engines load the safetensors, so
    conversion is right to use them; the pickle must never be opened."""
    copy_example(dest)
    (dest / "pytorch_model.bin").write_bytes(_torch_zip(payload_open(dest)))
