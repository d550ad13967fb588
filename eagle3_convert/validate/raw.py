"""The checkpoint as far as it can be read: config.json and every tensor header, with a finding per problem."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import sidecar
from ..atomic import CONFIG_NAME
from ..converters.checkpoint import (Checkpoint, load_checkpoint, missing_config_hint, pickled_weights,
                                     pickles_ignored, read_json_file)
from ..converters import nemo_meta
from ..converters.gguf_file import gguf_file
from ..errors import Eagle3Error, FormatError
from ..safetensors_io import (INDEX_NAME, SINGLE_NAME, TensorRef, TensorSource, checked_member, read_header,
                              read_index)
from .findings import Finding, finding, from_error


@dataclass
class RawCheckpoint:
    """A checkpoint directory as far as it could be read: what is broken is reported, not raised."""

    path: Path
    config: dict[str, Any] | None
    tensors: dict[str, TensorSource]
    files: list[str]
    cut: set[str] = field(default_factory=set)  # tensors whose bytes the file does not fully hold
    sidecar: dict[str, Any] | None = None
    complete: bool = True  # every weight file's tensor table was read (else "missing" would be a guess)
    notes: list[str] = field(default_factory=list)  # what load_checkpoint notes of the same files
    refusal: Eagle3Error | None = None  # what load_checkpoint refuses the same files with: convert's own words

    _checkpoint: Checkpoint | None = field(default=None, repr=False, compare=False)

    def checkpoint(self) -> Checkpoint:
        """The checkpoint as the layouts read it, one object per validation: what it reads once is kept on it."""
        if self._checkpoint is None:
            self._checkpoint = self.fresh()
        return self._checkpoint

    def fresh(self) -> Checkpoint:
        """A new Checkpoint of what was read (nothing read of it yet: no detection, no reading)."""
        return Checkpoint(self.path, self.config or {}, dict(self.tensors), list(self.files), self.sidecar,
                          list(self.notes))

    def load(self, _path: Path | None = None, fresh: bool = False) -> Checkpoint:
        """convert.read_source's `load`: the checkpoint as load_checkpoint reads it, or its refusal, without reading
        the files again: the same Checkpoint each time, with what was read of it (detection, readings), or with
        `fresh` a new one, for a caller whose readings must not meet another's (hint planning)."""
        if self.refusal is not None:
            raise self.refusal
        return self.fresh() if fresh else self.checkpoint()


_HINT_REDOWNLOAD = "the file is damaged: download or copy the checkpoint again"


def read_raw(root: Path) -> tuple[RawCheckpoint, list[Finding]]:
    """config.json and every readable tensor header of `root`, with a finding per problem met."""
    root = Path(root)
    if gguf_file(root) is not None:  # a GGUF drafter (llama.cpp): its keys stand for config.json
        ckpt = load_checkpoint(root)
        return RawCheckpoint(ckpt.path, ckpt.config, ckpt.tensors, ckpt.weight_files, set(), ckpt.sidecar,
                             notes=ckpt.notes), []
    if not root.is_dir():
        raise FormatError(f"{root}: not a directory", "pass the directory that holds config.json and the weights",
                          code="E-SRC-MISSING")
    out = _Problems()
    config = None
    config_path = root / CONFIG_NAME
    if not config_path.is_file():
        refusal = FormatError(f"{root}: no config.json", missing_config_hint(root), code="E-SRC-MISSING")
        out.add(refusal, found=finding("E-SRC-MISSING", f"{refusal.message} (or it is not a regular file)",
                                       refusal.hint, where=CONFIG_NAME))
    else:
        try:
            config = read_json_file(config_path, f"{root}/config.json")
        except FormatError as exc:
            out.add(exc, CONFIG_NAME)
    before = len(out)
    tensors, files, cut = _read_weights(root, out)
    complete = not any(f.severity == "error" and f.code != "E-FILE-TRUNCATED" for f in out[before:])
    if not tensors and complete:
        out.add(FormatError(f"{root}: the weight files hold no tensors", "download the complete checkpoint",
                            code="E-SRC-EMPTY"))
    side, trusted = sidecar.read(root) if config is not None else (None, False)
    bins = pickled_weights(root)
    notes = pickles_ignored(bins) if files and not set(files) <= set(bins) else []  # safetensors beside pickles
    if config is not None and tensors and complete:
        try:
            tensors = nemo_meta.with_selected_vocab(root, config, tensors, files, notes)
        except FormatError as exc:
            out.add(exc, "d2t")
    refusal = out.refused[0] if out.refused else None
    single = root / SINGLE_NAME
    if refusal is not None and config is not None and not (root / INDEX_NAME).is_file() and \
            (single.exists() or single.is_symlink()) and not single.is_file():
        try:  # a model.safetensors that is no file: load_checkpoint reads every *.safetensors, and may refuse another
            load_checkpoint(root)
        except Eagle3Error as exc:
            refusal = exc
    return RawCheckpoint(root, config, tensors, files, cut, side if trusted else None, complete and bool(tensors),
                         notes, refusal), list(out)


class _Problems(list):
    """read_raw's findings, and beside them what load_checkpoint would refuse each with (mostly the same words)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[Eagle3Error] = []

    def add(self, refusal: Eagle3Error, where: str | None = None, found: Finding | None = None) -> None:
        """A problem: load_checkpoint's refusal, and the finding (by default in the same words)."""
        self.refused.append(refusal)
        self.append(found or from_error(refusal, where=where))


def _read_weights(root: Path, out: _Problems) -> tuple[dict[str, TensorSource], list[str], set[str]]:
    tensors: dict[str, TensorSource] = {}
    cut: set[str] = set()
    if (root / INDEX_NAME).is_file():
        try:
            weight_map = read_index(root)
        except FormatError as exc:
            out.add(exc, INDEX_NAME)
            return tensors, [], cut
        shards = sorted(set(weight_map.values()))
        read_ok = set()
        for shard in shards:
            try:
                path = checked_member(root, shard, INDEX_NAME)
            except FormatError as exc:
                out.add(exc, INDEX_NAME)
                continue
            if not path.is_file():
                out.add(FormatError(f"{INDEX_NAME} names shard {shard!r}, which is missing",
                                    "download the complete checkpoint (every shard)", code="E-FILE-MISSING"), shard)
                continue
            read_ok.add(shard)
            for name, ref in _read_file(path, out, cut).items():
                if weight_map.get(name) != shard or name in tensors:
                    out.add(FormatError(f"{shard}: tensor {name!r} is not listed for this shard in {INDEX_NAME}",
                                        "the index and shards disagree: re-download or rebuild the index",
                                        code="E-FILE-INDEX"), name)
                tensors.setdefault(name, ref)
        missing = sorted(n for n, shard in weight_map.items() if shard in read_ok and n not in tensors)
        if missing:
            refusal = FormatError(f"{INDEX_NAME} lists {len(missing)} tensor(s) no shard holds, e.g. {missing[0]!r}",
                                  "the index and shards disagree: re-download the checkpoint", code="E-FILE-INDEX")
            # (load_checkpoint stops at the first shard it cannot read: every shard was read when it says this)
            out.add(refusal, found=finding("E-FILE-INDEX", refusal.message.replace("no shard holds", "their shard does not hold"),
                                           refusal.hint, where=INDEX_NAME))
        return tensors, shards, cut
    single = root / SINGLE_NAME
    paths = [single] if single.exists() or single.is_symlink() else sorted(root.glob("*.safetensors"))
    if paths:
        for path in paths:
            try:
                checked_member(root, path.name, "checkpoint directory")
            except FormatError as exc:
                out.add(exc, path.name)
                continue
            for name, ref in _read_file(path, out, cut).items():
                if name in tensors:
                    out.add(FormatError(f"tensor {name!r} appears in two files without an index",
                                        f"add a {INDEX_NAME} or remove the stray file", code="E-FILE-INDEX"), name)
                    continue
                tensors[name] = ref
        return tensors, [p.name for p in paths], cut
    bins = pickled_weights(root)
    if bins:
        from ..bin_reader import read_bin_tensors  # torch, only for pickled checkpoints

        try:
            bin_tensors, files = read_bin_tensors(root, bins)
        except Eagle3Error as exc:
            out.add(exc, bins[0])
            return tensors, bins, cut
        return dict(bin_tensors), files, cut
    out.add(FormatError(f"{root}: no weights (model.safetensors, shards, pytorch_model.bin or draft_model.pt)",
                        "download the complete checkpoint", code="E-SRC-MISSING"), SINGLE_NAME)
    return tensors, [], cut


def _read_file(path: Path, out: _Problems, cut: set[str]) -> dict[str, TensorSource]:
    try:
        return dict(read_header(path).tensors)
    except FormatError as exc:
        partial = _truncated_tensors(path) if exc.code == "E-FILE-TRUNCATED" else None
        if partial is None:
            out.add(exc, path.name)
            return {}
        refs, short, promised, held = partial
        first = min(short, key=lambda n: refs[n].start)
        out.add(exc, found=finding(  # the finding says how much of the file is there
            "E-FILE-TRUNCATED", f"{path} is truncated: its header promises {promised} data bytes, only {held} "
            f"are present; {len(short)} tensor(s) from {first!r} on are incomplete", _HINT_REDOWNLOAD,
            where=path.name))
        cut.update(short)
        return dict(refs)


def _truncated_tensors(path: Path) -> tuple[dict[str, TensorRef], list[str], int, int] | None:
    """For a file cut inside its data: every tensor (by header) and which are short; None if anything else is off."""
    try:
        header = read_header(path, allow_truncated=True)
    except FormatError:
        return None
    if not header.cut:
        return None
    refs = header.tensors
    return (refs, list(header.cut), max(ref.end for ref in refs.values()) - header.data_start,
            header.file_size - header.data_start)
