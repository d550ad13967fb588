"""llama.cpp GGUF (`general.architecture = eagle3`): docs/formats.md §7, llama.cpp b11434.

The `eagle3` architecture holds one Llama-style decoder layer fusing exactly 3 captured states.
What it reads: `eagle3.target_layers` (capture BOUNDARIES, used in file order: written sorted),
`eagle3.target_hidden_size`, `eagle3.norm_before_residual` / `eagle3.norm_before_fc` (absent
means false: both are always written), the generic Llama keys from the DRAFTER config, and the
TARGET's tokenizer (`tokenizer.*`, copied from `--target-gguf`). Tensors carry llama.cpp's names;
q/k rows are permuted for GGML's interleaved RoPE; `hidden_norm` is `blk.0.attn_norm_2`,
`input_norm` is `enc.output_norm`; d2t is I64 ABSOLUTE target ids and t2d is not stored; llama3
rope scaling is the `rope_freqs` factor table. Norms are F32 (GGML's CPU multiply has no F32 x
BF16 kernel), d2t I64; the 2-D weights keep the source dtype unless `--outtype` says bf16, f16 or
f32. q8_0 and other quantized types are not written: quantize afterwards with `llama-quantize`.

Reading back (`--from gguf`) inverts every step: rows un-permuted, d2t turned into offsets, t2d
rebuilt, and norms returned to their source dtype (recorded in `eagle3_convert.record`, a key
llama.cpp ignores, with the canonical config llama.cpp's keys cannot hold: rope fields, extras).
Tensor bytes are streamed in bounded chunks both ways (one head's rows at a time for q/k).

The `gguf` package from PyPI (0.19.0, no EAGLE-3 constants) is the container: its GGUFWriter writes
the header, our keys and the tensor infos; the target's `tokenizer.*` records are copied verbatim as
byte spans and the tensor bytes streamed after them. Headers are read by `scan_gguf`, one streaming
pass (the package's GGUFReader builds numpy objects per tokenizer string: 600 MB and 10 s for a
Llama-3 vocabulary). `--to gguf` of an 8B drafter (850 MB) with a 128k-token target: 3.5 s, 75 MiB
peak RSS. The package is imported only when a GGUF is read or written (`pip install
eagle3-convert[gguf]`).
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..drafter import Drafter, DrafterConfig, TargetIdentity
from ..errors import FormatError, RefusalError, UsageError
from ..safetensors_io import InMemoryTensor, TensorRef, TensorSource, iter_tensor_chunks
from .. import sidecar as sidecar_mod
from .base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    WritePlan,
    check_tensor_table,
    json_bytes,
    modelopt_first_layer_note,
    refuse_unless,
)

ARCH = "eagle3"
RECORD_KEY = "eagle3_convert.record"  # our canonical config + source dtypes; llama.cpp ignores unknown keys
GGUF_PIN = "gguf==0.19.0"
CHUNK = 4 * 1024 * 1024
# Targets whose llama.cpp graph exposes the layer inputs (t_layer_inp), and those that also set t_h_nextn,
# which a capture at boundary L needs (docs/formats.md §7.3, grep of b11434 src/models/*.cpp).
LAYER_INP_ARCHS = frozenset({
    "bailingmoe3", "deepseek4", "gemma4", "hunyuan-vl", "lfm2", "llama", "mimo2", "minimax-01", "minimax-m2",
    "muse-glimmer", "nanbeige", "nemotron_h", "nemotron-h", "gpt-oss", "openai-moe", "qwen3", "qwen35", "qwen35moe",
    "qwen3moe", "qwen3next", "qwen4exp"})
NEXTN_ARCHS = frozenset({"bailingmoe3", "deepseek4", "gemma4", "mimo2", "nemotron_h", "nemotron-h", "gpt-oss",
                         "openai-moe", "qwen35", "qwen35moe", "qwen3next", "qwen4exp"})

# canonical name -> llama.cpp's GGUF name (single-layer Llama drafter)
NAMES = {
    "fc.weight": "fc.weight",
    "input_norm.weight": "enc.output_norm.weight",
    "embed_tokens.weight": "token_embd.weight",
    "layers.0.input_layernorm.weight": "blk.0.attn_norm.weight",
    "layers.0.hidden_norm.weight": "blk.0.attn_norm_2.weight",
    "layers.0.self_attn.q_proj.weight": "blk.0.attn_q.weight",
    "layers.0.self_attn.k_proj.weight": "blk.0.attn_k.weight",
    "layers.0.self_attn.v_proj.weight": "blk.0.attn_v.weight",
    "layers.0.self_attn.o_proj.weight": "blk.0.attn_output.weight",
    "layers.0.post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
    "layers.0.mlp.gate_proj.weight": "blk.0.ffn_gate.weight",
    "layers.0.mlp.up_proj.weight": "blk.0.ffn_up.weight",
    "layers.0.mlp.down_proj.weight": "blk.0.ffn_down.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
CANONICAL = {v: k for k, v in NAMES.items()}
ROPE_FREQS = "rope_freqs.weight"
D2T = "d2t"
OUTTYPES = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
FILE_TYPE = {"F32": 0, "F16": 1, "BF16": 32}  # llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16
GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30, "I64": 27}
DTYPE_OF_GGML = {v: k for k, v in GGML_TYPE.items()}
ELEMENT = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}
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
        from ..safetensors_io import _inside  # a symlink may lead into an HF cache's blobs/, nowhere else

        found = sorted(p for p in path.glob("*.gguf") if p.is_file() and _inside(path, p))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise FormatError(f"{path} holds {len(found)} GGUF files ({', '.join(p.name for p in found[:3])})",
                              "pass the .gguf file itself", code="E-SRC-AMBIGUOUS")
    return None


# ------------------------------------------------------------------ numeric helpers (numpy, per chunk)

def _convert(data: bytes | memoryview, src: str, dst: str) -> bytes | memoryview:
    """Element-wise dtype change of one chunk; exact for widening, round-to-nearest-even for narrowing
    (gguf-py's F32 -> BF16 rule, NaN kept quiet)."""
    if src == dst:
        return data
    import numpy as np

    if src == "BF16":
        f32 = (np.frombuffer(data, dtype="<u2").astype("<u4") << 16).view("<f4")
    elif src == "F16":
        f32 = np.frombuffer(data, dtype="<f2").astype("<f4")
    else:
        f32 = np.frombuffer(data, dtype="<f4")
    if dst == "F32":
        return f32.tobytes()
    if dst == "F16":
        with np.errstate(over="ignore"):
            return f32.astype("<f2").tobytes()
    n = f32.view("<u4").astype("<u8")
    n = np.where((n & 0x7FFFFFFF) > 0x7F800000, (n & 0xFFFF0000) | (64 << 16), n)
    n = (n + (0x7FFF + ((n >> 16) & 1))) >> 16
    return n.astype("<u2").tobytes()


def _exactly_back(data: bytes, stored: str, wanted: str) -> bytes | None:
    """`data` (dtype `stored`) in dtype `wanted`, if that loses nothing; else None."""
    back = _convert(data, stored, wanted)
    return bytes(back) if bytes(_convert(back, wanted, stored)) == bytes(data) else None


def _row_groups(src: TensorSource, group_bytes: int) -> Iterator[bytes]:
    """The tensor's bytes in consecutive pieces of exactly `group_bytes` (bounded buffer)."""
    buf = bytearray()
    for part in iter_tensor_chunks(src, max(group_bytes, CHUNK)):
        buf += part
        while len(buf) >= group_bytes:
            yield bytes(buf[:group_bytes])
            del buf[:group_bytes]
    if buf:
        raise FormatError(f"a tensor's bytes do not divide into rows of {group_bytes} bytes",
                          "the file is damaged", code="E-FILE-TRUNCATED")


def _permute_group(data: bytes, rows: int, row_bytes: int, inverse: bool) -> bytes:
    """One head's rows: HF [2, rows/2] halves -> GGML interleaved pairs (llama.cpp's LlamaModel.permute)."""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8).reshape(rows, row_bytes)
    if inverse:
        return a.reshape(rows // 2, 2, row_bytes).swapaxes(0, 1).reshape(rows, row_bytes).tobytes()
    return a.reshape(2, rows // 2, row_bytes).swapaxes(0, 1).reshape(rows, row_bytes).tobytes()


@dataclass(frozen=True)
class StreamedTensor:
    """A tensor computed from another while streamed: q/k rows (un)permuted per head, and/or a dtype change.

    Duck-typed TensorSource: safetensors_io reads and writes anything with `chunks()`."""

    base: TensorSource
    dtype: str
    shape: tuple[int, ...]
    heads: int = 0  # > 0: permute the rows in `heads` groups
    inverse: bool = False

    @property
    def nbytes(self) -> int:
        n = ELEMENT[self.dtype]
        for d in self.shape:
            n *= d
        return n

    def chunks(self) -> Iterator[bytes]:
        src_dtype = self.base.dtype
        rows = self.shape[0]
        row_bytes = (self.base.nbytes // rows) if rows else 0
        if self.heads:
            per = rows // self.heads
            for group in _row_groups(self.base, per * row_bytes):
                yield bytes(_convert(_permute_group(group, per, row_bytes, self.inverse), src_dtype, self.dtype))
            return
        step = max(ELEMENT[src_dtype], CHUNK - CHUNK % max(row_bytes, 1)) if rows else CHUNK
        for group in _row_groups_tail(self.base, step):
            yield bytes(_convert(group, src_dtype, self.dtype))


def _row_groups_tail(src: TensorSource, step: int) -> Iterator[bytes]:
    buf = bytearray()
    for part in iter_tensor_chunks(src, step):
        buf += part
        while len(buf) >= step:
            yield bytes(buf[:step])
            del buf[:step]
    if buf:
        yield bytes(buf)


# ------------------------------------------------------------------ the target

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


class _Stream:
    def __init__(self, f: Any, path: Path, size: int):
        self.f, self.path, self.size = f, path, size

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise FormatError(f"{self.path.name}: the GGUF header ends early", "the file is truncated or not a GGUF",
                              code="E-GGUF-READ")
        return data

    def unpack(self, fmt: str) -> Any:
        import struct

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
        import struct

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


def scan_gguf(path: Path, what: str) -> GGUFScan:
    """Header, keys and tensor infos of a GGUF file; tokenizer values skipped over (their spans kept)."""
    gguf = _gguf()
    try:
        size = path.stat().st_size
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
    arch: str
    block_count: int
    embedding_length: int
    vocab_size: int
    tokenizer: list[tuple[str, int, int]]  # tokenizer.* records as byte spans of `path`, copied verbatim


def read_target_gguf(path: str) -> TargetGGUF:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UsageError(f"--target-gguf {path}: no such file", "pass the target model's .gguf file",
                         code="E-GGUF-TARGET")
    try:
        scan = scan_gguf(p, "--target-gguf")
    except FormatError as exc:
        raise FormatError(exc.message, "pass the target model's .gguf file", code="E-GGUF-TARGET") from None
    arch = scan.kv.get("general.architecture")
    block_count = scan.kv.get(f"{arch}.block_count")
    width = scan.kv.get(f"{arch}.embedding_length")
    if not isinstance(arch, str) or not isinstance(block_count, int) or not isinstance(width, int) or not scan.tokens:
        raise FormatError(f"--target-gguf {path} lacks general.architecture, its block_count/embedding_length or "
                          "tokenizer.ggml.tokens", "pass the target model's own GGUF (made by llama.cpp's "
                          "convert_hf_to_gguf.py)", code="E-GGUF-TARGET")
    if arch == ARCH:
        raise UsageError(f"--target-gguf {path} is an EAGLE-3 drafter, not a target model",
                         "pass the target model's .gguf", code="E-GGUF-TARGET")
    return TargetGGUF(p, arch, block_count, width, scan.tokens, scan.raw)


# ------------------------------------------------------------------ reading a GGUF

def load_gguf_checkpoint(root: Path) -> Checkpoint:
    """A GGUF as a Checkpoint: `config` holds its non-tokenizer keys (plus `_gguf` facts), tensors its raw
    byte ranges by GGUF name."""
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
    ckpt_root = path.parent
    side = None
    record_text = config.get(RECORD_KEY)
    side_path = ckpt_root / sidecar_mod.SIDECAR_NAME
    if isinstance(record_text, str) and side_path.is_file():
        try:
            data = json.loads(side_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and data.get("sidecar_version") == sidecar_mod.SIDECAR_VERSION and \
                data.get("config_sha256") == sidecar_mod.config_digest(record_text.encode()):
            side = data  # written with this very GGUF's record
    return Checkpoint(path, config, tensors, [path.name], side, [])


def _record(ckpt: Checkpoint) -> dict[str, Any] | None:
    text = ckpt.config.get(RECORD_KEY)
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    data = data.get(RECORD_KEY) if isinstance(data, dict) else None  # the plan's config: {gguf, record}
    return data if isinstance(data, dict) and isinstance(data.get("drafter"), dict) else None


def _int(cfg: dict[str, Any], key: str, required: bool = True) -> int | None:
    value = cfg.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if required:
        raise FormatError(f"GGUF key {key} is {value!r}", "llama.cpp needs it: the file is not a complete eagle3 "
                          "GGUF", code="E-GGUF-KEY")
    return None


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return [int(x) for x in value]
    return None


# ------------------------------------------------------------------ llama3 rope factors

def llama3_rope_factors(params: dict[str, Any], head_dim: int) -> bytes:
    """llama.cpp's LlamaModel.generate_extra_tensors, in float32 as there."""
    import numpy as np

    base = params.get("rope_theta", 10000.0)
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim))))
    factor = params.get("factor", 8.0)
    low, high = params.get("low_freq_factor", 1.0), params.get("high_freq_factor", 4.0)
    old = params.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(freq)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype="<f4").tobytes()


# ------------------------------------------------------------------ the layout

class GGUFLayout(Layout):
    name = "gguf"
    summary = "llama.cpp GGUF (general.architecture eagle3), one file; `llama-server -md FILE --spec-type draft-eagle3`"
    engine = "vllm"  # eagle3.target_layers are capture boundaries, vLLM's convention
    home_engines = ("llamacpp",)

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        if "_gguf" not in ckpt.config:
            return None
        if ckpt.config.get("general.architecture") != ARCH:
            raise FormatError(f"{ckpt.path.name}: general.architecture is {ckpt.config.get('general.architecture')!r}, "
                              "not eagle3", "this is not an EAGLE-3 drafter GGUF", code="E-GGUF-ARCH")
        return Detection(self.name, True, "a GGUF with general.architecture eagle3")

    # ---------------------------------------------------------------- read
    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        if "_gguf" not in ckpt.config:
            raise FormatError(f"{ckpt.path}: not a GGUF", "--from gguf reads a .gguf file or a directory holding one",
                              code="E-GGUF-READ")
        self.detect(ckpt)
        meta = ckpt.config
        notes = list(ckpt.notes)
        a = ARCH
        layers = _int(meta, f"{a}.block_count")
        refuse_unless(layers == 1, f"{a}.block_count is {layers}; llama.cpp's eagle3 graph asserts one layer",
                      "the file is not a valid eagle3 drafter", "E-LAYERS-UNSUPPORTED")
        ids = _int_list(meta.get(f"{a}.target_layers"))
        if ids is None or len(ids) != 3:
            raise FormatError(f"{a}.target_layers is {meta.get(f'{a}.target_layers')!r}; llama.cpp requires exactly "
                              "3 ids", "the file is not a loadable eagle3 drafter", code="E-CAPTURE-COUNT")
        H = _int(meta, f"{a}.embedding_length")
        nh = _int(meta, f"{a}.attention.head_count")
        nkv = _int(meta, f"{a}.attention.head_count_kv", False) or nh
        ht = _int(meta, f"{a}.target_hidden_size")
        record = _record(ckpt)
        tensors = ckpt.tensors
        for name in tensors:
            if name not in CANONICAL and name not in (D2T, ROPE_FREQS):
                raise RefusalError(f"tensor {name!r} is not part of llama.cpp's eagle3 architecture",
                                   "llama.cpp refuses extra tensors (wrong number of tensors)", code="E-KEY-UNKNOWN")
        if "output.weight" not in tensors:
            raise RefusalError("the GGUF has no output.weight: llama.cpp then uses the target's head, which the "
                               "other layouts cannot express", "convert a drafter that carries its own lm_head",
                               code="E-GGUF-NO-LM-HEAD")
        head = tensors["output.weight"]
        vd = head.shape[0]
        d2t = tensors.get(D2T)
        vocab = meta.get(f"{a}.vocab_size") or meta["_gguf"].get("tokenizer_size")
        if not isinstance(vocab, int) or vocab <= 0:
            raise FormatError("the GGUF names no target vocabulary size (eagle3.vocab_size, tokenizer)",
                              "the file is incomplete", code="E-GGUF-KEY")
        if d2t is None and vd != vocab:
            raise FormatError(f"output.weight has {vd} rows but there is no d2t and the vocabulary has {vocab}",
                              "the file is damaged", code="E-VOCAB-MISSING")

        # The canonical config: our record where it agrees with the keys llama.cpp reads; the keys otherwise.
        nbr = bool(meta.get(f"{a}.norm_before_residual", False))
        nbf = bool(meta.get(f"{a}.norm_before_fc", False))
        boundaries = list(ids)
        fields: dict[str, Any] | None = None
        if record is not None:
            try:
                rec = DrafterConfig.model_validate(record["drafter"])
            except ValueError:
                rec = None
            if rec is not None:
                depth = rec.target.num_hidden_layers if rec.target else None
                from .layer_ids import default_boundaries

                rec_ids = rec.capture_boundaries if rec.capture_boundaries is not None else (
                    default_boundaries(depth) if depth else None)
                agrees = (rec.hidden_size == H and rec.num_attention_heads == nh and rec.num_key_value_heads == nkv
                          and rec.resolved_target_hidden_size == ht and rec.norm_before_residual == nbr
                          and rec.norm_before_fc == nbf and rec_ids is not None and sorted(rec_ids) == sorted(ids)
                          and rec.draft_vocab_size == vd and rec.vocab_size == vocab)
                if agrees:
                    fields = rec.model_dump()
                else:
                    notes.append(f"{RECORD_KEY} describes another drafter than the GGUF's own keys (edited after "
                                 "writing?): read from the keys llama.cpp reads")
        from_record = fields is not None
        if fields is None:
            fields = self._fields_from_keys(meta, H, nh, nkv, ht, vocab, vd, boundaries, nbr, nbf, tensors, notes)
        dtypes = (record or {}).get("dtypes") if from_record else None  # the source dtypes of OUR tensors
        dtypes = dtypes if isinstance(dtypes, dict) else {}
        cfg = DrafterConfig.model_validate(fields)

        canonical: dict[str, TensorSource] = {}
        for name, ref in tensors.items():
            if name in (D2T, ROPE_FREQS):
                continue
            cname = CANONICAL[name]
            want = dtypes.get(cname, ref.dtype)
            if cname.endswith("q_proj.weight") or cname.endswith("k_proj.weight"):
                heads = cfg.num_attention_heads if cname.endswith("q_proj.weight") else cfg.num_key_value_heads
                if ref.shape[0] % (2 * heads):
                    raise FormatError(f"{name} has {ref.shape[0]} rows, not 2 x {heads} heads' worth",
                                      "the file is damaged", code="E-SHAPE")
                canonical[cname] = StreamedTensor(ref, ref.dtype, ref.shape, heads=heads, inverse=True)
            elif want != ref.dtype and len(ref.shape) == 1 and want in ELEMENT:
                from ..safetensors_io import read_tensor_bytes

                back = _exactly_back(read_tensor_bytes(ref), ref.dtype, want)
                canonical[cname] = InMemoryTensor(want, ref.shape, back) if back is not None else ref
            else:
                canonical[cname] = ref
        rope = tensors.get(ROPE_FREQS)
        if rope is not None:
            params = cfg.rope_normalized()
            if str(params.get("rope_type", "")).lower() != "llama3":
                raise RefusalError("the GGUF carries rope_freqs (llama3 rope scaling) that no rope_scaling in the "
                                   "config explains", "convert the original safetensors drafter instead",
                                   code="E-GGUF-ROPE")
            from ..safetensors_io import read_tensor_bytes

            if read_tensor_bytes(rope) != llama3_rope_factors(params, cfg.resolved_head_dim):
                notes.append("rope_freqs differs from the factors the config's llama3 rope_scaling gives; the "
                             "config's rope_scaling is kept")

        from .vocab import VocabMap, encode_d2t
        from ..safetensors_io import read_tensor_bytes

        vmap = None
        if d2t is not None:
            import numpy as np

            if d2t.dtype != "I64" or d2t.shape != (vd,):
                raise FormatError(f"d2t is {d2t.dtype} {list(d2t.shape)}; llama.cpp asserts I64 [{vd}]",
                                  "the file is damaged", code="E-VOCAB-DTYPE")
            absolute = np.frombuffer(read_tensor_bytes(d2t), dtype="<i8").tolist()
            if any(not 0 <= t < vocab for t in absolute) or any(b <= a for a, b in zip(absolute, absolute[1:])):
                raise FormatError("d2t does not hold ascending absolute target ids below the vocabulary size",
                                  "llama.cpp's d2t holds absolute ids; this one is damaged", code="E-VOCAB-ORDER")
            offsets = encode_d2t([t - i for i, t in enumerate(absolute)])
            vmap = VocabMap(tuple(absolute), vocab, offsets, None)
            if vmap.is_identity:
                vmap = None
        drafter = Drafter(cfg, canonical, vmap, notes)
        check_tensor_table(drafter)
        return drafter

    def _fields_from_keys(self, meta: dict[str, Any], H: int, nh: int, nkv: int, ht: int, vocab: int, vd: int,
                          boundaries: list[int], nbr: bool, nbf: bool, tensors: dict[str, TensorSource],
                          notes: list[str]) -> dict[str, Any]:
        """A GGUF another tool wrote (llama.cpp's converter): only what its keys say."""
        a = ARCH
        if any(k.startswith(f"{a}.rope.scaling.") for k in meta) or ROPE_FREQS in tensors:
            raise RefusalError("the GGUF's rope scaling (rope_freqs or eagle3.rope.scaling.*) cannot be turned back "
                               "into the drafter's rope_scaling config", "convert the original safetensors drafter",
                               code="E-GGUF-ROPE")
        head_dim = _int(meta, f"{a}.attention.key_length", False) or _int(meta, f"{a}.rope.dimension_count", False)
        fc = tensors.get("fc.weight")
        fields: dict[str, Any] = {
            "family": "llama", "hidden_size": H, "num_attention_heads": nh, "num_key_value_heads": nkv,
            "intermediate_size": _int(meta, f"{a}.feed_forward_length"),
            "head_dim": head_dim if head_dim and head_dim != H // nh else None,
            "num_layers": 1, "vocab_size": vocab, "draft_vocab_size": vd,
            "target_hidden_size": ht if ht != H else None,
            "num_aux_hidden_states": fc.shape[1] // ht if fc is not None and ht else 3,
            "capture_boundaries": sorted(boundaries), "norm_before_residual": nbr, "norm_before_fc": nbf,
        }
        eps = meta.get(f"{a}.attention.layer_norm_rms_epsilon")
        if isinstance(eps, float):
            fields["rms_norm_eps"] = float(f"{eps:.6g}")  # stored as float32
        ctx = meta.get(f"{a}.context_length")
        if isinstance(ctx, int):
            fields["max_position_embeddings"] = ctx
        theta = meta.get(f"{a}.rope.freq_base")
        if isinstance(theta, float):
            fields["rope"] = {"rope_theta": float(f"{theta:.7g}")}
        if boundaries != sorted(boundaries):
            notes.append(f"eagle3.target_layers {boundaries} are not ascending: llama.cpp fuses them in file order, "
                         "fc's column blocks follow ascending layers; read as sorted")
        notes.append("read from llama.cpp's keys alone (no eagle3_convert.record): decoder-config extras are not "
                     "known")
        return fields

    # ---------------------------------------------------------------- plan
    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        where = "llama.cpp's eagle3 architecture"
        refuse_unless(cfg.family == "llama", f"the drafter is a {cfg.family} drafter; {where} builds a Llama layer "
                      "(no q/k norms, no MLA)", "serve it with vLLM (--to vllm)", "E-FAMILY-UNSUPPORTED")
        refuse_unless(cfg.num_layers == 1, f"the drafter has {cfg.num_layers} layers; {where} builds exactly one",
                      "serve it with vLLM (--to vllm)", "E-LAYERS-UNSUPPORTED")
        refuse_unless(cfg.num_aux_hidden_states == 3, f"fc fuses {cfg.num_aux_hidden_states} captured states; "
                      f"{where} requires exactly 3", "serve it with vLLM (--to vllm)", "E-CAPTURE-COUNT")
        for flag in ("fc_norm", "norm_output"):
            refuse_unless(not getattr(cfg, flag), f"{flag} is true and {where} has no {flag}",
                          "serve it with vLLM (--to vllm)", "E-FLAG-UNSUPPORTED")
        refuse_unless(not (cfg.attention_bias or cfg.mlp_bias), f"the drafter has bias tensors; {where} loads none",
                      "serve it with vLLM (--to vllm)", "E-BIAS-UNSUPPORTED")
        if not options.target_gguf:
            raise UsageError("--to gguf needs the target's GGUF: --target-gguf PATH", "llama.cpp reads the "
                             "drafter's tokenizer from the file, so it is copied from the target's GGUF (made by "
                             "llama.cpp's convert_hf_to_gguf.py; a tokenizer directory would need llama.cpp's own "
                             "tokenizer conversion)", code="E-GGUF-TARGET")
        target = read_target_gguf(options.target_gguf)
        L, Ht = target.block_count, cfg.resolved_target_hidden_size
        refuse_unless(Ht == target.embedding_length, f"the drafter fuses target states of width {Ht} but the target "
                      f"GGUF's embedding_length is {target.embedding_length}", "pass the GGUF of the target the "
                      "drafter was trained for", "E-HIDDEN-UNSUPPORTED")
        refuse_unless(cfg.vocab_size == target.vocab_size, f"the drafter's target vocabulary is {cfg.vocab_size} "
                      f"tokens, the target GGUF's tokenizer has {target.vocab_size}", "pass the GGUF of the target "
                      "the drafter was trained for", "E-GGUF-VOCAB")
        known = next((t.num_hidden_layers for t in (options.target, cfg.target) if t and t.num_hidden_layers), None)
        refuse_unless(known in (None, L), f"the drafter was trained on a {known}-layer target; the target GGUF has "
                      f"{L} blocks", "pass the GGUF of the target the drafter was trained for", "E-GGUF-TARGET")
        from .layer_ids import default_boundaries

        boundaries = sorted(cfg.capture_boundaries) if cfg.capture_boundaries is not None else default_boundaries(L)
        refuse_unless(target.arch in LAYER_INP_ARCHS, f"llama.cpp's {target.arch} graph exposes no layer inputs: "
                      "EAGLE-3 cannot capture from this target", "llama.cpp serves EAGLE-3 on llama, qwen3, gpt-oss, "
                      "qwen3.5, deepseek4, gemma4 and a few more targets", "E-CAPTURE-UNREACHABLE")
        for b in boundaries:
            refuse_unless(0 <= b <= L, f"boundary {b} is past the target's {L} blocks", "check the capture layers",
                          "E-CAPTURE-UNREACHABLE")
            refuse_unless(b < L or target.arch in NEXTN_ARCHS, f"boundary {b} is the last block's output, which "
                          f"llama.cpp's {target.arch} graph does not expose (no t_h_nextn): llama.cpp would abort",
                          "serve it with vLLM (--to vllm), or retrain on capturable layers", "E-CAPTURE-UNREACHABLE")
        outtype = (options.outtype or "auto").lower()
        if outtype not in ("auto", *OUTTYPES):
            raise UsageError(f"--outtype {outtype}: not written here", "choose auto, bf16, f16 or f32 (quantize "
                             "afterwards with llama-quantize)", code="E-GGUF-OUTTYPE")
        notes = modelopt_first_layer_note(cfg, self.name)
        if cfg.capture_boundaries is None:
            notes.append(f"eagle3.target_layers written as {boundaries}: the engine default {{2, L//2, L-3}} on the "
                         f"{L}-layer target")

        # tensors, in the order llama.cpp's converter writes them
        tensors: dict[str, TensorSource] = {}
        dtypes: dict[str, str] = {}
        for cname, gname in NAMES.items():
            src = drafter.tensors.get(cname)
            if src is None:
                continue
            if src.dtype not in ("F32", "F16", "BF16"):
                raise RefusalError(f"{cname} is {src.dtype}; llama.cpp's GGUF holds F32, F16 or BF16 weights here",
                                   "dequantize the drafter first", code="E-GGUF-DTYPE")
            dtypes[cname] = src.dtype
            if len(src.shape) == 1:
                dst = "F32"
            else:
                dst = OUTTYPES.get(outtype, src.dtype)
            heads = 0
            if cname.endswith("q_proj.weight"):
                heads = cfg.num_attention_heads
            elif cname.endswith("k_proj.weight"):
                heads = cfg.num_key_value_heads
            if heads and src.shape[0] % (2 * heads):
                raise RefusalError(f"{cname} has {src.shape[0]} rows, not an even number per head",
                                   "GGML's RoPE permutation needs an even head_dim", code="E-SHAPE")
            tensors[gname] = src if (dst == src.dtype and not heads) else \
                StreamedTensor(src, dst, tuple(src.shape), heads=heads)
        params = cfg.rope_normalized()
        if str(params.get("rope_type", "")).lower() == "llama3":
            tensors[ROPE_FREQS] = InMemoryTensor("F32", (cfg.resolved_head_dim // 2,),
                                                 llama3_rope_factors(params, cfg.resolved_head_dim))
        elif params.get("rope_type", "default") not in ("default", None):
            raise RefusalError(f"rope_type {params.get('rope_type')!r}: this writer carries default and llama3 rope",
                               "serve it with vLLM (--to vllm)", code="E-GGUF-ROPE")
        if drafter.vocab is not None:
            import numpy as np

            tensors[D2T] = InMemoryTensor("I64", (cfg.draft_vocab_size,),
                                          np.array(drafter.vocab.target_ids, dtype="<i8").tobytes())
        main_dtype = OUTTYPES.get(outtype) or (drafter.tensors["fc.weight"].dtype
                                               if drafter.tensors["fc.weight"].dtype in FILE_TYPE else "F32")

        target_id = TargetIdentity.merged(cfg.target, TargetIdentity(num_hidden_layers=L, hidden_size=Ht,
                                                                      vocab_size=target.vocab_size))
        record_cfg = cfg.model_copy(update={"target": target_id})
        a = ARCH
        metadata: dict[str, Any] = {
            "general.architecture": a,
            "general.file_type": FILE_TYPE[main_dtype],
            f"{a}.block_count": 1,
            f"{a}.context_length": cfg.max_position_embeddings or 4096,
            f"{a}.embedding_length": cfg.hidden_size,
            f"{a}.feed_forward_length": cfg.intermediate_size,
            f"{a}.attention.head_count": cfg.num_attention_heads,
            f"{a}.attention.head_count_kv": cfg.num_key_value_heads,
            f"{a}.attention.layer_norm_rms_epsilon": cfg.rms_norm_eps,
            f"{a}.rope.freq_base": float(params.get("rope_theta", 10000.0)),
            f"{a}.rope.dimension_count": cfg.resolved_head_dim,
            f"{a}.vocab_size": cfg.vocab_size,
            f"{a}.target_layers": boundaries,
            f"{a}.target_hidden_size": Ht,
            f"{a}.norm_before_residual": cfg.norm_before_residual,
            f"{a}.norm_before_fc": cfg.norm_before_fc,
        }
        if cfg.head_dim is not None:
            metadata[f"{a}.attention.key_length"] = cfg.head_dim
            metadata[f"{a}.attention.value_length"] = cfg.head_dim
        record = {"drafter": record_cfg.model_dump(mode="json"), "dtypes": dtypes,
                  "target_gguf": {"architecture": target.arch, "block_count": L, "file": target.path.name}}
        # What the sidecar is bound to (config_sha256): this exact record, stored in the GGUF.
        plan_config = {"gguf": metadata, RECORD_KEY: record}
        record_text = json_bytes(plan_config).decode()
        plan_config_types = _key_types(metadata)

        def write(tmp: Path, dest: Path, on_progress: Callable[[int], None] | None) -> list[str]:
            name = file_name(dest, main_dtype)
            _write_gguf(tmp / name, metadata, plan_config_types, record_text, target, tensors, on_progress)
            return [name]

        return WritePlan(self.name, plan_config, tensors, notes, writer=write)


def file_name(dest: Path, dtype: str) -> str:
    """`eagle3-<name>-<TYPE>.gguf`: the sidecar name llama.cpp's `-hf` download picks beside a target GGUF."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", dest.name).strip("-.") or "drafter"
    stem = re.sub(r"^eagle3-", "", stem, flags=re.IGNORECASE)
    stem = re.sub(r"-(gguf|bf16|f16|f32)$", "", stem, flags=re.IGNORECASE) or "drafter"
    return f"eagle3-{stem}-{dtype}.gguf"


def _key_types(metadata: dict[str, Any]) -> dict[str, str]:
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


def _write_gguf(path: Path, metadata: dict[str, Any], types: dict[str, str], record_text: str, target: TargetGGUF,
                tensors: dict[str, TensorSource], on_progress: Callable[[int], None] | None) -> None:
    """Header, keys and tensor infos through gguf's GGUFWriter; tensor bytes streamed after them."""
    gguf = _gguf()
    vt = gguf.GGUFValueType
    writer = gguf.GGUFWriter(path, ARCH)  # adds general.architecture
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
        from ..errors import DestinationError

        raise DestinationError(f"writing {path.name} failed: {exc.strerror or exc}",
                               "check free space (df -h) and permissions of the destination") from None
    finally:
        writer.close()


def validate_gguf(raw: Any, engines: Any, label: str, deep: bool = False,
                  progress: Callable[[int], Callable[[int], None]] | None = None, target: Any = None) -> Any:
    """`validate` on a GGUF drafter: our reader's checks (names, shapes, d2t, keys), then llama.cpp's reading
    of the file (engines/llamacpp.read_gguf): the capture boundaries it takes, or its refusal."""
    from ..validate import Finding, Report, deep_scan, from_error
    from ..engines.llamacpp import read_gguf
    from ..errors import Eagle3Error

    findings: list[Any] = []
    report = Report(label, "gguf", "general.architecture eagle3 (a GGUF)", ["llamacpp"], findings, candidates=["gguf"])
    for engine in engines or ():
        if engine != "llamacpp":
            findings.append(Finding("E-ENGINE-REFUSES", "error", f"{engine} does not load GGUF drafters",
                                    "check a GGUF with --engine llamacpp, or convert it (--to vllm)", engine=engine))
    ckpt = raw.checkpoint()
    drafter = None
    try:
        drafter = LAYOUT.read(ckpt, ConvertOptions())
    except Eagle3Error as exc:
        findings.append(from_error(exc, where=raw.files[0] if raw.files else None))
    meta = {k: v for k, v in ckpt.config.items() if not k.startswith("_")}
    reading = read_gguf(meta, list(ckpt.tensors))
    if reading.refusal:
        findings.append(Finding("E-ENGINE-REFUSES", "error", f"llama.cpp refuses it: {reading.refusal}",
                                "rewrite it with `eagle3-convert --to gguf` from the source drafter", engine="llamacpp"))
    else:
        for why in reading.silent:
            findings.append(Finding("W-ENGINE-SILENT", "warning", why, "rewrite it with `eagle3-convert --to gguf`",
                                    engine="llamacpp"))
        findings.append(Finding("I-CAPTURE-GGUF", "info", f"llama.cpp captures boundaries {reading.captures} "
                                "(eagle3.target_layers, the input of each block)", None, "eagle3.target_layers",
                                "llamacpp"))
    if target is not None and drafter is not None:
        depth = getattr(getattr(target, "identity", None), "num_hidden_layers", None)
        if depth is not None and reading.captures and max(reading.captures) > depth:
            findings.append(Finding("E-CAPTURE-UNREACHABLE", "error", f"eagle3.target_layers {reading.captures} "
                                    f"reach past the target's {depth} layers: llama.cpp aborts", None,
                                    "eagle3.target_layers", "llamacpp"))
    if deep:
        total = sum(t.nbytes for t in raw.tensors.values())
        report.manifest, more = deep_scan(raw.tensors, set(), on_bytes=progress(total) if progress else None)
        findings.extend(more)
    return report


LAYOUT = GGUFLayout()
