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
- `data.pkl` is run by `torch_pickle`, a small pickle machine of our own, not `pickle`: the
  opcodes torch.save writes and the globals a state dict of tensors needs (the allowlist of
  `torch.load(weights_only=True)`, narrowed), each resolved to an inert object of ours.
- A tensor must be dense and contiguous (row-major strides), of a dtype safetensors has,
  inside its storage; each storage must be exactly as long as its persistent id declares.
- data.pkl must pass its CRC-32. Storages are not checksummed here (that would read every
  byte; torch.load with mmap does not either): `validate --deep` hashes and scans them.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from .errors import FormatError
from .safetensors_io import DTYPE_SIZES, TensorRef, open_plain_file
from .torch_pickle import Refused, Storage, StorageType, Tensor, unpickle

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
            raise Refused("E-BIN-ZIP", "a member's extra field runs past its end")
        if tag == 1:
            values = [v[0] for v in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            wanted = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF]
            if len(values) < sum(wanted):
                raise Refused("E-BIN-ZIP", "a member's zip64 field is shorter than its header says")
            it = iter(values)
            usize = next(it) if wanted[0] else usize
            csize = next(it) if wanted[1] else csize
            offset = next(it) if wanted[2] else offset
            return usize, csize, offset
        pos += 4 + size
    if 0xFFFFFFFF in (usize, csize, offset):
        raise Refused("E-BIN-ZIP", "a member marks its size or offset as zip64 but has no zip64 field")
    return usize, csize, offset


def read_members(fd: int, file_size: int) -> tuple[str, dict[str, Member]]:
    """Parse a torch zip archive's directory strictly: (the archive's directory name, members by name)."""
    if file_size < _EOCD.size:
        raise Refused("E-BIN-ZIP", f"{file_size} bytes, too short for a zip archive (truncated?)")
    eocd_at = file_size - _EOCD.size
    sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = _EOCD.unpack(_pread(fd, _EOCD.size, eocd_at))
    if sig != b"PK\x05\x06" or comment:
        raise Refused("E-BIN-ZIP", "no zip end record at the end of the file (truncated, or bytes appended)")
    cd_end = eocd_at
    locator_at = eocd_at - _Z64_LOCATOR.size
    locator = _pread(fd, _Z64_LOCATOR.size, locator_at) if locator_at >= 0 else b""
    if locator[:4] == b"PK\x06\x07":
        _, z_disk, z_offset, z_disks = _Z64_LOCATOR.unpack(locator)
        if z_disk != 0 or z_disks != 1 or z_offset + _Z64_EOCD.size > locator_at:
            raise Refused("E-BIN-ZIP", "its zip64 end-record locator points outside the file")
        (sig, _, _, _, disk, cd_disk, n_disk, n_total, cd_size, cd_offset) = _Z64_EOCD.unpack(
            _pread(fd, _Z64_EOCD.size, z_offset))
        if sig != b"PK\x06\x06":
            raise Refused("E-BIN-ZIP", "its zip64 end record is missing where the locator says")
        cd_end = z_offset
    if disk or cd_disk or n_disk != n_total:
        raise Refused("E-BIN-ZIP", "a multi-disk (split) zip archive")
    if cd_size > MAX_CENTRAL_DIRECTORY_BYTES:
        raise Refused("E-BIN-ZIP", f"its zip directory declares {cd_size} bytes, over the "
                                   f"{MAX_CENTRAL_DIRECTORY_BYTES}-byte bound")
    if cd_offset + cd_size != cd_end:
        # Bytes before the archive, or a directory that is not where the end record says: readers would disagree.
        raise Refused("E-BIN-ZIP", f"its zip directory ({cd_size} bytes at {cd_offset}) does not end where the "
                                   f"end record is ({cd_end})")
    if n_total * _CENTRAL.size > cd_size:
        raise Refused("E-BIN-ZIP", f"its zip directory declares {n_total} members, more than its {cd_size} bytes hold")
    cd = _pread(fd, cd_size, cd_offset)
    if len(cd) != cd_size:
        raise Refused("E-BIN-ZIP", "the file ends inside its zip directory (truncated?)")

    members: dict[str, Member] = {}
    order: list[str] = []
    pos = 0
    for _ in range(n_total):
        if pos + _CENTRAL.size > cd_size:
            raise Refused("E-BIN-ZIP", "its zip directory is cut short")
        (sig, _, _, flags, method, _, _, crc, csize, usize, nlen, xlen, clen, disk_start, _, _,
         offset) = _CENTRAL.unpack_from(cd, pos)
        raw_name = cd[pos + 46:pos + 46 + nlen]
        extra = cd[pos + 46 + nlen:pos + 46 + nlen + xlen]
        if sig != b"PK\x01\x02" or pos + 46 + nlen + xlen + clen > cd_size:
            raise Refused("E-BIN-ZIP", "its zip directory holds a damaged entry")
        pos += 46 + nlen + xlen + clen
        usize, csize, offset = _zip64_fields(extra, usize, csize, offset)
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "ascii")
        except UnicodeDecodeError:
            raise Refused("E-BIN-ZIP", f"a member name is not text ({raw_name[:40]!r})") from None
        shown = ascii(name[:80])
        if disk_start:
            raise Refused("E-BIN-ZIP", f"member {shown} lies on another disk of a split archive")
        if flags & 0x41:
            raise Refused("E-BIN-ZIP", f"member {shown} is encrypted")
        if method != 0 or csize != usize:
            raise Refused("E-BIN-ZIP", f"member {shown} is compressed (method {method}); torch.save stores every "
                                       "member uncompressed")
        parts = name.split("/")
        if name.startswith("/") or len(parts) < 2 or any(_UNSAFE_PART.search(p) for p in parts):
            raise Refused("E-BIN-ZIP", f"member name {shown} is not a plain path inside the archive's directory")
        if name in members:
            raise Refused("E-BIN-ZIP", f"member {shown} appears twice (readers would disagree on which is read)")
        local = _pread(fd, _LOCAL.size, offset)
        if len(local) != _LOCAL.size or local[:4] != b"PK\x03\x04":
            raise Refused("E-BIN-ZIP", f"member {shown}: no local header at offset {offset}")
        (_, _, _, l_method, _, _, _, _, _, l_nlen, l_xlen) = _LOCAL.unpack(local)
        if l_method != method or _pread(fd, l_nlen, offset + _LOCAL.size) != raw_name:
            raise Refused("E-BIN-ZIP", f"member {shown}: its local header disagrees with the zip directory")
        member = Member(name, offset, offset + _LOCAL.size + l_nlen + l_xlen, usize, crc)
        if member.data_end > cd_offset:
            raise Refused("E-BIN-ZIP", f"member {shown} declares {usize} bytes at {member.data_start}, past the "
                                       f"archive's data (which ends at {cd_offset}): truncated, or a false size")
        members[name] = member
        order.append(name)
    if pos != cd_size:
        raise Refused("E-BIN-ZIP", "its zip directory holds bytes after its last entry")
    spans = sorted((m.header_offset, m.data_end, m.name) for m in members.values())
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            raise Refused("E-BIN-ZIP", f"members {ascii(n0[:80])} and {ascii(n1[:80])} share bytes (overlapping "
                                       "storages)")
    if not order:
        raise Refused("E-BIN-ZIP", "an empty zip archive")
    prefix = order[0].split("/", 1)[0]
    stray = next((n for n in order if not n.startswith(prefix + "/")), None)
    if stray is not None:
        raise Refused("E-BIN-ZIP", f"member {ascii(stray[:80])} lies outside the archive's directory {prefix!r}")
    return prefix, members


# ------------------------------------------------------------------ the checkpoint


_STORAGE_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")


def _state_dict(fd: int, file_size: int, scalars: bool = False) -> tuple[dict[str, Tensor], str]:
    """The tensors the archive's pickle holds by name; with `scalars`, plain numbers and strings beside them (a
    trainer's meta file: NeMo Automodel's eagle_meta.pt holds its step and epoch) are admitted and left out."""
    prefix, members = read_members(fd, file_size)
    pkl = members.get(f"{prefix}/data.pkl")
    if pkl is None:
        raise Refused("E-BIN-ZIP", f"the archive holds no {prefix}/data.pkl: not a torch.save checkpoint")
    if pkl.size > MAX_PICKLE_BYTES:
        raise Refused("E-BIN-FORMAT", f"its data.pkl is {pkl.size} bytes, over the {MAX_PICKLE_BYTES}-byte bound "
                                      "for a state dict's pickle")
    byteorder = members.get(f"{prefix}/byteorder")
    if byteorder is not None:
        order = _pread(fd, min(byteorder.size, 16), byteorder.data_start)
        if order != b"little":
            raise Refused("E-BIN-FORMAT", f"its byte order is {order[:16]!r}, not little-endian (safetensors and "
                                          "every engine are little-endian)")
    data = _pread(fd, pkl.size, pkl.data_start)
    if len(data) != pkl.size or zlib.crc32(data) != pkl.crc:
        raise Refused("E-BIN-ZIP", "its data.pkl fails its checksum (damaged)")

    storages: dict[str, Storage] = {}

    def persistent_load(pid: object) -> Storage:
        if type(pid) is not tuple or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise Refused("E-BIN-UNSAFE", f"its pickle loads a persistent id that is not a storage "
                                          f"({type(pid).__name__})")
        _, stype, key, location, numel = pid
        if type(stype) is not StorageType:
            raise Refused("E-BIN-UNSAFE", f"its pickle loads a storage of type {type(stype).__name__}")
        if type(key) is not str or not _STORAGE_KEY.fullmatch(key):
            shown = ascii(key[:80]) if type(key) is str else f"of type {type(key).__name__}"
            raise Refused("E-BIN-ZIP", f"its pickle names storage {shown}, not a plain storage key")
        if type(location) is not str or len(location) > 64 or type(numel) is not int or numel < 0:
            raise Refused("E-BIN-FORMAT", f"storage {key!r} has a malformed location or size")
        member = members.get(f"{prefix}/data/{key}")
        if member is None:
            raise Refused("E-BIN-ZIP", f"its pickle names storage {key!r}, which the archive does not hold")
        nbytes = numel * (1 if stype.untyped else DTYPE_SIZES[stype.dtype])
        if nbytes != member.size:
            raise Refused("E-BIN-ZIP", f"storage {key!r} declares {nbytes} bytes, its record holds {member.size}")
        known = storages.get(key)
        if known is not None:
            if known.dtype != stype.dtype:
                raise Refused("E-BIN-FORMAT", f"storage {key!r} is loaded as two different types")
            return known
        storages[key] = Storage(key, stype.dtype, member.data_start, member.size)
        return storages[key]

    state = unpickle(data, persistent_load)
    if type(state) not in (dict, OrderedDict):
        raise Refused("E-BIN-FORMAT", f"holds a {type(state).__name__.lstrip('_')}, not a state dict")
    for key, value in list(state.items()):
        if type(key) is str and scalars and type(value) in _SCALARS:
            del state[key]
        elif type(key) is not str or type(value) is not Tensor:
            raise Refused("E-BIN-FORMAT", f"entry {ascii(key)[:80]} is not a tensor "
                                          f"(a {type(value).__name__.lstrip('_')})")
    return state, prefix


_SCALARS = (int, float, str, bool, type(None))


def read_state_dict(path: Path, display: str, scalars: bool = False) -> dict[str, TensorRef]:
    """Every tensor of a torch zip checkpoint as a byte range of `path` (no tensor data is read).

    `display` names the file in errors (the name the checkpoint gives it); `scalars` admits plain values beside the
    tensors (a trainer's meta file), which are not returned."""
    fd = open_plain_file(path, display)
    try:
        state, _ = _state_dict(fd, os.fstat(fd).st_size, scalars)
    except Refused as exc:
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
        start = t.storage.data_start + t.offset * itemsize
        out[name] = TensorRef(path, name, t.dtype, tuple(t.shape), start, start + numel * itemsize)
    return out
