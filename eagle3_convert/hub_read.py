"""Reading a drafter repo on the Hub without its weights, for `registry sync` and `search`.

One repo at one commit: its metadata (`model_info`: commit sha, card front matter, tags, files with their LFS
sha256), config.json, the eagle3-convert.json sidecar, and, where the layout readers are needed, each
safetensors file's HEADER and its d2t/t2d vocabulary map (or a GGUF drafter's header and its small tensors),
fetched by HTTP Range into a sparse local copy that has the real file's size. The layout detection and readers
then run on that copy unchanged; they read no weight matrix, so none is ever downloaded.

A repo whose trusted sidecar (written by us with this very config.json) names its drafter id is taken from the
sidecar, config.json and the card alone; `headers=True` reads it with the layout readers too and compares. A
sidecar whose config.json was edited since still names the drafter (its id is of the weights): the facts are
then the files' own, under that id, so that they are compared with the record.

huggingface_hub is hub_client.py's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hub_client, sidecar
from .convert import ids_as_written, make_options, read_source, sidecar_facts
from .converters.gguf_file import DTYPE_OF_GGML, HeaderEndsEarly, scan_gguf
from .converters.gguf_tensors import ELEMENT
from .target_identity import TargetIdentity
from .errors import Eagle3Error, FormatError
from .safetensors_io import INDEX_NAME, MAX_HEADER_BYTES, read_header
from .sources import chosen_gguf, endpoint_from_env, hub_error
from .targets import load_target

CONFIG = "config.json"
VOCAB_TENSORS = ("d2t", "t2d")  # the only tensors the layout readers read bytes of
FINGERPRINT_KIND = "hub-fingerprint"
SIDECAR_KIND = "sidecar"
WEIGHTS_ALIAS = "weights-sha256:"  # a registry alias naming a drafter by its weight files' bytes (weights_alias)
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin")
GGUF_FIRST_READ = 64 << 10  # the first Range of a GGUF: a small tokenizer's header fits; a 128k one takes 4 more
MAX_GGUF_HEADER = 256 << 20
GGUF_BYTES_READ = ("d2t", "rope_freqs.weight")  # 2-D or not, the GGUF reader reads these bytes (with the 1-D norms)


@dataclass
class HubRepo:
    """What the Hub says about one repo at one commit, before any file is read."""

    repo_id: str
    sha: str
    card: dict[str, Any]  # the README front matter (cardData), {} when none
    tags: list[str]
    files: dict[str, str | None]  # top-level file -> LFS sha256 (None for regular files)

    @property
    def uri(self) -> str:
        return f"hf://{self.repo_id}@{self.sha}"


@dataclass
class HubDrafter:
    """One repo as read: the facts to record (sidecar-shaped), or why it could not be read."""

    repo: HubRepo
    layout: str | None = None
    facts: dict[str, Any] | None = None  # drafter_id, target, capture_boundaries, ids_as_written, flags, ...
    identity: str | None = None  # SIDECAR_KIND or FINGERPRINT_KIND
    claimed: bool = False  # SIDECAR_KIND from a sidecar config.json no longer matches: its id, the files' facts
    config: dict[str, Any] | None = None  # config.json as stored
    names: list[str] | None = None  # stored tensor names (from the headers), None when not read
    drafter: Any = None  # the canonical Drafter, when the layout reader ran
    target: Any = None  # TargetIdentity used for the capture conventions (depth, family), or None
    problem: tuple[str, str] | None = None  # (finding code, one line) for a broken or ambiguous repo
    notes: list[str] = field(default_factory=list)


class HubReader:
    """A Hub session: lists repos, reads drafters, remembers targets already fetched."""

    def __init__(self, endpoint: str | None = None, token: str | None = None):
        self.endpoint = endpoint_from_env(endpoint)
        self.token = token
        self.api = hub_client.api(self.endpoint, token)
        self._targets: dict[str, Any] = {}

    def _guard(self, what: str, repo_id: str, call: Any) -> Any:
        try:
            with hub_client.quiet():
                return call()
        except Eagle3Error:
            raise
        except Exception as exc:  # huggingface_hub and httpx errors: one line with a hint
            raise hub_error(exc, repo_id, what, self.endpoint) from None

    def repos(self, spec: str) -> list[str]:
        """`org/name`: that repo; `org`: every model repo of that user or organisation."""
        if "/" in spec:
            return [spec]
        return self._guard("listing the models of", spec,
                           lambda: [m.id for m in self.api.list_models(author=spec)])

    def search(self, target: str) -> list[str]:
        """Repos whose card names `target` as base_model (the Hub tags them `base_model:<target>`)."""
        return self._guard("searching drafters of", target,
                           lambda: [m.id for m in self.api.list_models(filter=f"base_model:{target}")])

    def info(self, repo_id: str, revision: str | None = None) -> HubRepo:
        info = self._guard("reading", repo_id,
                           lambda: self.api.model_info(repo_id, revision=revision, files_metadata=True))
        files = {s.rfilename: (s.lfs.sha256 if s.lfs else None) for s in info.siblings or []
                 if "/" not in s.rfilename}
        card = info.card_data.to_dict() if info.card_data is not None else {}
        return HubRepo(repo_id, info.sha or "", card, list(info.tags or []), files)

    def _get(self, repo: HubRepo, name: str, start: int | None = None, end: int | None = None) -> tuple[bytes, int]:
        """A file's bytes at the repo's commit, or bytes [start, end] of it by HTTP Range; (bytes, file size)."""
        def fetch() -> tuple[bytes, int]:
            response = hub_client.get_file(repo.repo_id, name, revision=repo.sha, endpoint=self.endpoint,
                                           token=self.token, byte_range=None if start is None else (start, end))
            total = re.search(r"/(\d+)$", response.headers.get("Content-Range", ""))
            return response.content, int(total[1]) if total else len(response.content)

        return self._guard(f"downloading {name} of", repo.repo_id, fetch)

    def target(self, name: str | None) -> Any:
        """The target's TargetIdentity from its config.json on the Hub (depth, family), fetched once; None if
        it is not there (the capture conventions then go without the target's depth)."""
        if not name:
            return None
        if name not in self._targets:
            try:
                self._targets[name] = load_target(name, endpoint=self.endpoint, token=self.token)
            except Eagle3Error:
                self._targets[name] = None
        return self._targets[name]

    def read(self, repo_id: str, *, headers: bool = False, revision: str | None = None) -> HubDrafter:
        """Read one repo; a broken or ambiguous one comes back with `problem` set, never raised (Hub errors such
        as 401/404 on the repo itself are raised: they are the caller's to report)."""
        repo = self.info(repo_id, revision)
        out = HubDrafter(repo)
        gguf = chosen_gguf(list(repo.files))
        if CONFIG not in repo.files and gguf is None:
            ggufs = sorted(f for f in repo.files if f.endswith(".gguf"))
            out.problem = (("E-SRC-AMBIGUOUS", f"{len(ggufs)} GGUF files ({', '.join(ggufs[:3])}) and none named "
                            "eagle3-<name>-<BF16|F16|F32>.gguf") if ggufs else ("E-SRC-MISSING", "no config.json"))
            return out
        with tempfile.TemporaryDirectory(prefix="eagle3-hub-") as tmp:
            root = Path(tmp)
            for name in (CONFIG, sidecar.SIDECAR_NAME, INDEX_NAME):
                if name in repo.files:
                    (root / name).write_bytes(self._get(repo, name)[0])
            claims, trusted = sidecar.read(root)
            if gguf is None:
                try:
                    out.config = json.loads((root / CONFIG).read_bytes())
                except (ValueError, UnicodeDecodeError):
                    out.config = None  # the reader says why, with its code
                if trusted and _names_a_drafter(claims):
                    out.facts, out.identity, out.layout = dict(claims), SIDECAR_KIND, claims.get("layout")
                    if not headers:
                        return out
            self._read_with_layouts(root, out, gguf, claims)
        return out

    def _read_with_layouts(self, root: Path, out: HubDrafter, gguf: str | None, claims: dict[str, Any] | None) -> None:
        """The layout readers on sparse copies of the weights (safetensors headers, or a GGUF's header) and what
        the repo's files say: the trusted sidecar's facts, else the files' own with the drafter id the sidecar
        claims (config.json edited since: the weights it names are still these), else a Hub fingerprint."""
        repo = out.repo
        weights = [gguf] if gguf else sorted(f for f in repo.files if f.endswith(".safetensors"))
        if not weights:
            pickles = [f for f in repo.files if f.endswith(".bin")]
            out.problem = (("E-HUB-PICKLED", "pickled weights (.bin) only: no header to read without "
                            "downloading them") if pickles else ("E-SRC-MISSING", "no safetensors weights"))
            return
        try:
            for name in weights:
                (self._gguf_copy if gguf else self._sparse_copy)(repo, name, root / name, out)
        except Eagle3Error as exc:
            if exc.code.startswith("E-HUB"):
                raise
            out.problem = (exc.code, exc.message)
            return
        options = make_options()
        named = _card_target(repo.card)
        target = self.target(named)
        options.target = target
        if named:
            options.verifier = TargetIdentity(name_or_path=named)
        try:
            source = read_source(str(root), options=options)
        except Eagle3Error as exc:
            out.problem = (exc.code, " ".join(str(exc.message).replace(str(root), repo.repo_id).split()))
            return
        drafter, layout = source.drafter, source.detection.layout
        facts = sidecar_facts(drafter, options, None)
        facts["ids_as_written"] = ids_as_written(drafter.config, options, [layout])
        facts["drafter_id"] = fingerprint(drafter, repo)
        out.names = sorted(source.stored_names)
        out.drafter, out.target = drafter, target
        if gguf:
            out.config = source.stored_config  # the GGUF's keys: what llama.cpp reads
            if _names_a_drafter(source.sidecar):  # bound to this GGUF's record
                out.facts, out.identity = dict(source.sidecar), SIDECAR_KIND
        if out.facts is not None:  # a trusted sidecar: the readers must agree with what it says
            out.layout = out.layout or layout
            said = out.facts.get("capture_boundaries")
            if drafter.config.capture_boundaries is not None and said != drafter.config.capture_boundaries:
                out.problem = ("E-HUB-SIDECAR", f"eagle3-convert.json says capture boundaries {said}, "
                               f"{weights[0] if gguf else 'config.json'} means {drafter.config.capture_boundaries}")
            return
        if _names_a_drafter(claims):
            facts = _claimed(facts, claims)
            out.notes.append(f"{weights[0] if gguf else 'config.json'} was changed after eagle3-convert.json was "
                             f"written: its facts are read from the files, the drafter id "
                             f"{claims['drafter_id'][:12]} (of the weights) from eagle3-convert.json")
            out.facts, out.identity, out.layout, out.claimed = facts, SIDECAR_KIND, layout, True
            return
        out.facts, out.identity, out.layout = facts, FINGERPRINT_KIND, layout

    def _gguf_copy(self, repo: HubRepo, name: str, dest: Path, out: HubDrafter) -> None:
        """`dest`: the GGUF's header (keys, tokenizer, tensor infos: fetched by Range in growing steps until the
        scan ends inside them) and its small tensors (d2t, rope_freqs, the 1-D norms: all the layout reader reads
        bytes of) at their offsets, zeros elsewhere, at its real size."""
        have, size, step = b"", None, GGUF_FIRST_READ
        while True:
            part, size = self._get(repo, name, len(have), len(have) + step - 1)
            have += part
            dest.write_bytes(have)
            try:
                scan = scan_gguf(dest, "GGUF", size=size)
                break
            except HeaderEndsEarly:
                if len(have) >= size or len(have) >= MAX_GGUF_HEADER:
                    raise
                step = 3 * len(have)  # four times what is held: 5 requests in all for a 128k-token tokenizer
        with open(dest, "r+b") as f:
            f.truncate(size)
            for tensor, shape, kind, offset in scan.tensors:
                dtype = DTYPE_OF_GGML.get(kind)
                if dtype is None or (len(shape) != 1 and tensor not in GGUF_BYTES_READ):
                    continue  # a quantized tensor: the reader refuses the file, with its code
                nbytes = ELEMENT[dtype] * math.prod(shape)
                if nbytes and offset + nbytes <= size and offset + nbytes > len(have):
                    data, _ = self._get(repo, name, offset, offset + nbytes - 1)
                    f.seek(offset)
                    f.write(data)

    def _sparse_copy(self, repo: HubRepo, name: str, dest: Path, out: HubDrafter) -> None:
        """`dest`: the file's header and vocabulary tensors at their offsets, zeros elsewhere, at its real size."""
        prefix, size = self._get(repo, name, 0, 7)
        if len(prefix) < 8:
            raise _format(f"{name}: {size} bytes, too short for a safetensors header", "E-FILE-TRUNCATED")
        (n,) = struct.unpack("<Q", prefix[:8])
        if n > MAX_HEADER_BYTES or n > size - 8:
            raise _format(f"{name}: header length {n} does not fit the {size}-byte file", "E-FILE-HEADER")
        header, _ = self._get(repo, name, 8, 8 + n - 1)
        with open(dest, "wb") as f:
            f.write(prefix[:8] + header)
            f.truncate(size)
        refs = read_header(dest).tensors  # the same checks as for a local file
        with open(dest, "r+b") as f:
            for tensor in VOCAB_TENSORS:
                ref = refs.get(tensor)
                if ref is not None and ref.end > ref.start:
                    data, _ = self._get(repo, name, ref.start, ref.end - 1)
                    f.seek(ref.start)
                    f.write(data)


def _names_a_drafter(side: dict[str, Any] | None) -> bool:
    """Whether a sidecar names a drafter id as ours are spelled (a sha256 in hex): a registry lookup of anything
    else would be a prefix or an error."""
    return bool(side) and isinstance(side.get("drafter_id"), str) and re.fullmatch(r"[0-9a-f]{64}", side[
        "drafter_id"]) is not None


def _claimed(facts: dict[str, Any], claims: dict[str, Any]) -> dict[str, Any]:
    """The files' own facts under the drafter id a sidecar claims, with what only it knows (provenance, history,
    a target the files do not name)."""
    out = {**facts, "drafter_id": claims["drafter_id"], "lineage": claims.get("lineage") or []}
    target = out.get("target") if isinstance(out.get("target"), dict) else {}
    if not target.get("name_or_path") and isinstance(claims.get("target"), dict):
        out["target"] = claims["target"]
    for key in ("trained_with", "converted_from"):
        if claims.get(key) is not None:
            out[key] = claims[key]
    return out


def weights_alias(files: dict[str, str | None]) -> str | None:
    """What names a repo's weights by their bytes alone: the LFS sha256 (the Hub's content hash, which
    `publish` computes for its upload) of every weight file the readers read (its safetensors, else its pickles,
    or the one drafter GGUF: not a target GGUF beside it), sorted. Equal for two repos exactly when their
    weight files are byte-identical, whatever config.json, sidecar or file names say; None when a weight file is
    not in LFS (no hash to compare) or there is none."""
    gguf = chosen_gguf(list(files))
    names = [gguf] if gguf else ([n for n in files if n.endswith(".safetensors")]  # what the readers read
                                 or [n for n in files if n.endswith(".bin")])
    hashes = [files[name] for name in names]
    if not hashes or any(sha is None for sha in hashes):
        return None
    return WEIGHTS_ALIAS + hashlib.sha256(",".join(sorted(hashes)).encode()).hexdigest()  # type: ignore[arg-type]


def _format(message: str, code: str) -> Eagle3Error:
    return FormatError(message, "the file on the Hub is damaged: upload it again", code=code)


def _card_target(card: dict[str, Any]) -> str | None:
    base = card.get("base_model")
    if isinstance(base, list) and len(base) == 1:
        base = base[0]
    return base if isinstance(base, str) and base else None


def fingerprint(drafter: Any, repo: HubRepo) -> str:
    """The id of a drafter we did not publish, read without its weights: sha256 of the canonical config, each
    tensor's canonical name, dtype and shape, the draft vocabulary, and the LFS sha256 (the Hub's content hash)
    of every weight file. Stable across commits that leave config and weights alone; NOT the drafter id
    `registry add` computes from the tensor bytes of a downloaded copy."""
    payload = {
        "kind": FINGERPRINT_KIND,
        "config": drafter.config.semantic_dict(),
        "tensors": {n: [t.dtype, list(t.shape)] for n, t in sorted(drafter.tensors.items())},
        "draft_vocab": list(drafter.vocab.target_ids) if drafter.vocab is not None else None,
        "weights": {n: sha for n, sha in sorted(repo.files.items()) if n.endswith(".safetensors")},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()
