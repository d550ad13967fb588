"""What every layout shares: the source checkpoint as read from disk, the Layout
interface, the decoder-config mapping, and the atomic writer."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..drafter import (FAMILY_BY_MODEL_TYPE, MLA_KEYS, MODEL_TYPE_BY_FAMILY, ROPE_KEYS, Drafter, DrafterConfig,
                       TargetIdentity)
from ..errors import DestinationError, FormatError, RefusalError
from ..safetensors_io import INDEX_NAME, TensorRef, TensorSource, read_tensor_table, write_tensor_files
from .. import sidecar

CONFIG_NAME = "config.json"
MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a drafter config is a few KB; anything this big is hostile


def _no_dup_pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    """A small JSON object file, refusing huge, non-UTF-8, duplicate-key or non-object content."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise FormatError(f"{what} is {size} bytes; a config this large is not a drafter config",
                              "point at the drafter's own directory", code="E-CONFIG-SIZE")
        data = json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=_no_dup_pairs)
    except FormatError:
        raise
    except OSError as exc:
        raise FormatError(f"{what}: cannot read ({exc.strerror or exc})", "check the path and permissions",
                          code="E-CONFIG-READ") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"{what} is not valid JSON ({str(exc)[:120]})", "fix or re-download the file",
                          code="E-CONFIG-JSON") from None
    if not isinstance(data, dict):
        raise FormatError(f"{what} is not a JSON object", "fix or re-download the file", code="E-CONFIG-JSON")
    return data


@dataclass
class Checkpoint:
    """A checkpoint directory as found on disk: raw config, tensors by stored name, sidecar."""

    path: Path
    config: dict[str, Any]
    tensors: dict[str, TensorSource]
    weight_files: list[str]
    sidecar: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    root = Path(path)
    if not root.is_dir():
        raise FormatError(f"{root}: not a directory", "pass the directory that holds config.json and the weights",
                          code="E-SRC-MISSING")
    config_path = root / CONFIG_NAME
    if not config_path.is_file():
        raise FormatError(f"{root}: no config.json", "a drafter directory needs config.json beside its weights",
                          code="E-SRC-MISSING")
    config = read_json_file(config_path, f"{root.name}/config.json")
    notes: list[str] = []
    has_st = (root / INDEX_NAME).is_file() or any(root.glob("*.safetensors"))
    bins = sorted(p.name for p in root.glob("*.bin") if p.name.startswith("pytorch_model"))
    if has_st:
        tensors, files = read_tensor_table(root)
        if bins:
            notes.append(f"ignored {', '.join(bins)}: safetensors weights are present and are never second-guessed "
                         "by a pickle")
    elif bins:
        from ..bin_reader import read_bin_tensors  # torch is heavy: only for pickled checkpoints

        tensors, files = read_bin_tensors(root, bins)
    else:
        raise FormatError(f"{root}: no weights (model.safetensors, shards, or pytorch_model.bin)",
                          "download the complete checkpoint", code="E-SRC-MISSING")
    if not tensors:
        raise FormatError(f"{root}: the weight files hold no tensors", "download the complete checkpoint",
                          code="E-SRC-EMPTY")
    return Checkpoint(root, config, dict(tensors), files, sidecar.read(root, config_path), notes)


# ------------------------------------------------------- decoder config mapping

# HF decoder-config keys the canonical config models; every other key rides in hf_extra.
DECODER_KEYS = {
    "model_type", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "num_hidden_layers", "rms_norm_eps", "hidden_act", "max_position_embeddings", "vocab_size",
    "attention_bias", "mlp_bias", "tie_word_embeddings", *ROPE_KEYS, *MLA_KEYS,
}
# Top-level keys that are about the file, not the decoder (they stay top level in every layout).
TOP_KEYS = ("dtype", "torch_dtype", "transformers_version")


def _require_int(cfg: Mapping[str, Any], key: str, where: str) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise FormatError(f"{where}: {key} is {value!r}; expected a positive integer",
                          f"fix {key} in config.json", code="E-CONFIG-FIELD")
    return value


def decoder_fields(dec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Canonical fields from an HF-style decoder config (flat SGLang or speculators' transformer_layer_config)."""
    model_type = dec.get("model_type", "llama")
    family = FAMILY_BY_MODEL_TYPE.get(model_type)
    if family is None:
        raise FormatError(f"{where}: drafter model_type {model_type!r} is not an EAGLE-3 drafter family",
                          f"known: {', '.join(sorted(FAMILY_BY_MODEL_TYPE))}", code="E-CONFIG-FAMILY")
    layers = dec.get("num_hidden_layers", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        raise FormatError(f"{where}: num_hidden_layers is {layers!r}", "a drafter has at least one layer",
                          code="E-CONFIG-FIELD")
    fields: dict[str, Any] = {
        "family": family,
        "hidden_size": _require_int(dec, "hidden_size", where),
        "intermediate_size": _require_int(dec, "intermediate_size", where),
        "num_attention_heads": _require_int(dec, "num_attention_heads", where),
        "num_key_value_heads": dec.get("num_key_value_heads") or dec.get("num_attention_heads"),
        "head_dim": dec.get("head_dim"),
        "num_layers": layers,
        "vocab_size": _require_int(dec, "vocab_size", where),
        "rope": {k: dec[k] for k in ROPE_KEYS if k in dec},
        "attention_bias": bool(dec.get("attention_bias", False)),
        "mlp_bias": bool(dec.get("mlp_bias", False)),
        "tie_word_embeddings": bool(dec.get("tie_word_embeddings", False)),
    }
    for key in ("rms_norm_eps", "hidden_act", "max_position_embeddings"):
        if dec.get(key) is not None:
            fields[key] = dec[key]
    if family == "deepseek_mla":
        fields["mla"] = {k: dec[k] for k in MLA_KEYS if k in dec}
        if "q_lora_rank" not in fields["mla"]:
            raise FormatError(f"{where}: an MLA drafter needs q_lora_rank", "add q_lora_rank to config.json",
                              code="E-CONFIG-FIELD")
    return fields


def decoder_dict(cfg: DrafterConfig) -> dict[str, Any]:
    """The HF decoder config of a canonical drafter (verbatim extras and rope fields included)."""
    dec: dict[str, Any] = dict(cfg.hf_extra)
    dec.update({
        "model_type": cfg.hf_extra.get("model_type", MODEL_TYPE_BY_FAMILY[cfg.family]),
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "num_hidden_layers": cfg.num_layers,
        "rms_norm_eps": cfg.rms_norm_eps,
        "hidden_act": cfg.hidden_act,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_word_embeddings,
    })
    if cfg.head_dim is not None:
        dec["head_dim"] = cfg.head_dim
    if cfg.max_position_embeddings is not None:
        dec["max_position_embeddings"] = cfg.max_position_embeddings
    if cfg.family != "deepseek_mla":
        dec["attention_bias"] = cfg.attention_bias
        dec["mlp_bias"] = cfg.mlp_bias
    dec.update(cfg.rope)
    if cfg.mla:
        dec.update(cfg.mla)
    return dec


def split_decoder_extra(dec: Mapping[str, Any], also_known: set[str]) -> dict[str, Any]:
    """Decoder keys the canonical config does not model, kept verbatim."""
    return {k: v for k, v in dec.items() if k not in DECODER_KEYS and k not in also_known and k not in TOP_KEYS}


def keep_model_type_spelling(dec: Mapping[str, Any], fields: dict[str, Any], extra: dict[str, Any]) -> None:
    # deepseek_v3 and kimi_k2 are one family but keep the spelling the source used.
    if dec.get("model_type") and dec["model_type"] != MODEL_TYPE_BY_FAMILY[fields["family"]]:
        extra["model_type"] = dec["model_type"]


# --------------------------------------------------------------- tensor names

@dataclass(frozen=True)
class Rename:
    """`canonical` prefix <-> `stored` prefix; rules are tried in order, both directions."""

    canonical: str
    stored: str
    single_layer_only: bool = False
    read_only: bool = False  # an alias the engine accepts, never written


def to_canonical(name: str, renames: tuple[Rename, ...], num_layers: int) -> str:
    for rule in renames:
        if rule.single_layer_only and num_layers != 1:
            continue
        if name.startswith(rule.stored):
            return rule.canonical + name[len(rule.stored):]
    return name


def to_stored(name: str, renames: tuple[Rename, ...], num_layers: int) -> str:
    for rule in renames:
        if rule.read_only or (rule.single_layer_only and num_layers != 1):
            continue
        if name.startswith(rule.canonical):
            return rule.stored + name[len(rule.canonical):]
    return name


KNOWN_CANONICAL = re.compile(
    r"^(fc\.weight|norm\.weight|lm_head\.weight|embed_tokens\.weight|input_norm\.weight|fc_norm\.\d+\.weight"
    r"|layers\.\d+\.(self_attn\.[a-z_]+|mlp\.(gate|up|down)_proj|input_layernorm|hidden_norm"
    r"|post_attention_layernorm)\.(weight|bias))$")
VOCAB_TENSORS = ("d2t", "t2d")


def canonical_tensors(ckpt: Checkpoint, renames: tuple[Rename, ...], num_layers: int,
                      layout: str) -> dict[str, TensorSource]:
    """Stored names -> canonical names; refuses names the layout does not know (they would be lost)."""
    out: dict[str, TensorSource] = {}
    for stored, ref in ckpt.tensors.items():
        if stored in VOCAB_TENSORS:
            continue
        canonical = to_canonical(stored, renames, num_layers)
        if not KNOWN_CANONICAL.match(canonical):
            raise RefusalError(
                f"tensor {stored!r} is not part of an EAGLE-3 drafter in the {layout} layout",
                "engines drop unknown tensors silently; rename it to the layout's key or remove it "
                "(`eagle3-convert inspect` lists the expected names)", code="E-KEY-UNKNOWN")
        if canonical in out:
            raise FormatError(f"tensors {stored!r} and another name both map to {canonical!r}",
                              "the checkpoint stores one weight twice under two prefixes; keep one",
                              code="E-KEY-DUPLICATE")
        out[canonical] = ref
    return out


# ----------------------------------------------------------------- layouts


@dataclass
class ConvertOptions:
    verifier: TargetIdentity | None = None  # who the drafter proposes for, written where a layout names it
    target: TargetIdentity | None = None  # the target's config: depth and family for capture-id quirks
    repair_d2t_absolute: bool = False


@dataclass
class WritePlan:
    """Everything a destination directory will hold, before any byte is written."""

    layout: str
    config: dict[str, Any]
    tensors: dict[str, TensorSource]
    notes: list[str] = field(default_factory=list)
    derived_keys: list[str] = field(default_factory=list)  # added for an engine's sake; dropped when read back


@dataclass(frozen=True)
class Detection:
    layout: str
    confident: bool
    reason: str


class Layout(ABC):
    """One checkpoint layout: how to recognise it, read it into a Drafter, and plan writing one."""

    name: str
    summary: str  # one line: who writes it, who serves it
    engine: str  # the engine whose capture-id convention this layout's config follows

    @abstractmethod
    def detect(self, ckpt: Checkpoint) -> Detection | None: ...

    @abstractmethod
    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter: ...

    @abstractmethod
    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan: ...


# ------------------------------------------------------------------ writing


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_destination(dest: Path, src: Path | None, force: bool) -> None:
    dest_abs = dest.resolve()
    if src is not None:
        src_abs = src.resolve()
        if dest_abs == src_abs or src_abs in dest_abs.parents or dest_abs in src_abs.parents:
            raise DestinationError(f"destination {dest} overlaps the source {src}",
                                   "write to a separate directory; the source is never modified")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise DestinationError(f"destination {dest} exists and is not a directory",
                               "choose a new directory name")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise DestinationError(f"destination {dest} is not empty", "pass --force to replace it, or choose a new path")
    if dest_abs.parent.exists() and not dest_abs.parent.is_dir():
        raise DestinationError(f"{dest_abs.parent} is not a directory", "choose a destination inside a directory")


def write_directory(dest: Path, config: Mapping[str, Any], tensors: Mapping[str, TensorSource],
                    extra_files: Mapping[str, bytes] | Callable[[], Mapping[str, bytes]], *,
                    src: Path | None, force: bool,
                    max_shard_bytes: int | None = None,
                    on_progress: Callable[[int], None] | None = None) -> list[str]:
    """Write a checkpoint into a temporary directory beside `dest`, then rename it into place.

    `extra_files` may be a function: it is called once the weights are written (files that
    describe the weights, e.g. a sidecar holding their digest, can then be completed).
    """
    dest = Path(dest)
    check_destination(dest, src, force)
    try:
        dest.resolve().parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.resolve().parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result should not be
    except OSError as exc:
        raise DestinationError(f"cannot write beside {dest}: {exc.strerror or exc}",
                               "check permissions and free space of the destination's parent") from None
    try:
        files = write_tensor_files(tmp, tensors, {"format": "pt"}, max_shard_bytes, on_progress)
        extra = extra_files() if callable(extra_files) else extra_files
        for name, data in {CONFIG_NAME: json_bytes(config), **extra}.items():
            (tmp / name).write_bytes(data)
            files.append(name)
        _fsync_dir(tmp)
        _swap_into_place(tmp, dest, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(dest.resolve().parent)
    return files


def _swap_into_place(tmp: Path, dest: Path, force: bool) -> None:
    old = None
    if dest.is_dir() and force and any(dest.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.resolve().parent))
        os.rename(dest, old / "d")
    try:
        os.rename(tmp, dest)  # atomic; fails if another writer already filled dest
    except OSError as exc:
        if old is not None:
            os.rename(old / "d", dest)
            old.rmdir()
        raise DestinationError(f"cannot move the result into {dest}: {exc.strerror or exc}",
                               "another process wrote there at the same time, or it is not writable; retry") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def refuse_unless(cond: bool, message: str, hint: str, code: str) -> None:
    if not cond:
        raise RefusalError(message, hint, code=code)


# ------------------------------------------------------------ shared reading

def infer_num_aux(fc: TensorSource | None, cfg_fields: Mapping[str, Any], declared: int | None,
                  ids: list[int] | None) -> int:
    """k from the fc width (k * Ht), cross-checked against the ids and any declared count."""
    ht = cfg_fields.get("target_hidden_size") or cfg_fields["hidden_size"]
    if fc is None or len(fc.shape) != 2:
        return declared or (len(ids) if ids else 3)
    width = fc.shape[1]
    if width % ht:
        raise FormatError(f"fc.weight has {width} input columns, not a multiple of the target hidden size {ht}",
                          "check target_hidden_size in config.json", code="E-SHAPE-FC")
    k = width // ht
    if ids is not None and len(ids) != k:
        raise FormatError(f"fc.weight fuses {k} captured states but the config lists {len(ids)} capture ids {ids}",
                          "the capture id list and the fc width must agree", code="E-CAPTURE-COUNT")
    if declared is not None and declared != k:
        raise FormatError(f"num_aux_hidden_states is {declared} but fc.weight fuses {k} states",
                          "fix num_aux_hidden_states in config.json", code="E-CAPTURE-COUNT")
    return k


def check_tensor_table(drafter: Drafter) -> None:
    """Every tensor the config implies is present with its shape; nothing the config does not explain."""
    from ..drafter import expected_shapes, optional_shapes

    expected = expected_shapes(drafter.config)
    optional = optional_shapes(drafter.config)
    missing = sorted(set(expected) - set(drafter.tensors))
    if missing:
        raise FormatError(f"required tensor {missing[0]!r} is missing" +
                          (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                          "the checkpoint is incomplete; engines would load it silently with random weights",
                          code="E-KEY-MISSING")
    for name, src in drafter.tensors.items():
        want = expected.get(name) or optional.get(name)
        if want is None:
            raise RefusalError(f"tensor {name!r} is not used by this drafter's config "
                               "(a flag is off or the layer count is wrong)",
                               "engines drop such tensors silently; fix the config flag or remove the tensor",
                               code="E-KEY-UNUSED")
        if tuple(src.shape) != want:
            raise FormatError(f"tensor {name!r} has shape {list(src.shape)}, the config implies {list(want)}",
                              "config.json and the weights disagree", code="E-SHAPE")


def read_vocab(ckpt: Checkpoint, vocab_size: int, draft_vocab_size: int, options: ConvertOptions):
    from .vocab import read_vocab_map, repair_absolute_d2t

    d2t, t2d = ckpt.tensors.get("d2t"), ckpt.tensors.get("t2d")
    if options.repair_d2t_absolute and d2t is not None:
        d2t = repair_absolute_d2t(d2t)
    vocab = read_vocab_map(d2t, t2d, vocab_size, draft_vocab_size)
    return None if vocab is None or vocab.is_identity else vocab


def source_config(ckpt: Checkpoint) -> dict[str, Any]:
    """config.json less the keys our own writer derived for an engine (the sidecar lists them)."""
    derived = (ckpt.sidecar or {}).get("derived_config_keys") or []
    return {k: v for k, v in ckpt.config.items() if k not in derived}


def restore_from_sidecar(ckpt: Checkpoint, cfg: dict[str, Any]) -> None:
    """Facts our own earlier output carried beside config.json (other layouts' keys, the target)."""
    if not ckpt.sidecar:
        return
    carried = ckpt.sidecar.get("layout_extra")
    if isinstance(carried, dict):
        for layout, extra in carried.items():
            if isinstance(extra, dict):
                cfg["layout_extra"].setdefault(layout, extra)
    target = ckpt.sidecar.get("target")
    if isinstance(target, dict):
        try:
            known = TargetIdentity.model_validate(target)
        except ValueError:
            return
        if cfg.get("target") is None:
            cfg["target"] = known
        else:
            current = cfg["target"]
            for key, value in known.model_dump().items():
                if getattr(current, key) in (None, []) and value not in (None, []):
                    setattr(current, key, value)
