"""What the registry records about a drafter: the target it was trained on, its capture
boundaries, where copies of it live and what each copy was converted from.

Storing them is store.py's job. Capture boundaries are the canonical form
of docs/formats.md §4 (b = index into Hugging Face `output_hidden_states`); `ids_as_written` keeps the ids
each engine's config actually spelled, because those differ between conventions for the same physical layers.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    TypeAdapter,
    field_serializer,
    field_validator,
    model_validator,
)

from ..target_identity import TargetIdentity

HUB_SCHEME = "hf://"
# A published sidecar names the uploader's local copies by directory name only (their paths stay private).
ELSEWHERE_SCHEME = "local:"

# Hub repo ids: "name" (legacy, unowned) or "org/name".
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_HEX_ID = re.compile(r"[0-9a-f]{8,128}")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    # Naive times are taken as UTC so records written on different machines compare.
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def drafter_id_value(value: str) -> str:
    normalized = value.strip().lower()
    if not _HEX_ID.fullmatch(normalized):
        raise ValueError(f"a drafter id is 8 to 128 hex characters, got {value!r}")
    return normalized


def non_blank(value: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise ValueError("must not be empty")
    return stripped


def split_uri(uri: str) -> tuple[Literal["local", "hub", "elsewhere"], str, str | None]:
    """Split a location uri into (kind, path or repo id, revision).

    `hf://ORG/NAME@REV` is a Hub repo at a revision (branch, tag or commit; optional); `local:NAME` a copy
    on the machine that published a sidecar (a lineage end only); anything else must be an absolute local path.
    """
    if uri.startswith(HUB_SCHEME):
        repo, at, revision = uri[len(HUB_SCHEME) :].partition("@")
        if not _REPO_ID.fullmatch(repo):
            raise ValueError(f"{uri!r} is not hf://ORG/NAME[@REVISION]")
        if at and (not revision or any(c.isspace() for c in revision)):
            raise ValueError(f"{uri!r} has an empty or blank revision after '@'")
        return "hub", repo, revision or None
    if uri.startswith(ELSEWHERE_SCHEME):
        name = uri[len(ELSEWHERE_SCHEME):]
        if not name.strip() or "/" in name:
            raise ValueError(f"{uri!r} is not local:NAME")
        return "elsewhere", name, None
    if not os.path.isabs(uri):
        raise ValueError(f"a local location must be an absolute path, got {uri!r}")
    return "local", uri, None


def copy_uri(uri: str) -> str:
    """A location the registry can find again: `local:NAME` names only another machine's copy."""
    if split_uri(uri)[0] == "elsewhere":
        raise ValueError(f"{uri!r} names a copy on the machine that published it, not a location")
    return uri


UTCDateTime = Annotated[datetime, AfterValidator(as_utc)]
DrafterId = Annotated[str, AfterValidator(drafter_id_value)]
NonBlank = Annotated[str, AfterValidator(non_blank)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# What the registry keeps of the target a drafter was trained against (a TargetIdentity): its columns, in the
# order a record shows them. model_type has no column; depth and widths are kept only when positive.
RECORDED_TARGET = ("name_or_path", "revision", "architectures", "num_hidden_layers", "hidden_size", "vocab_size",
                   "aliases", "config_sha256")
_TARGET_SHAPE = TypeAdapter(dict[str, PositiveInt | None])


class LocationRef(_Model):
    """Where one copy of a drafter lives, in which layout (no timestamp)."""

    layout: NonBlank
    uri: str

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, value: str) -> str:
        kind, path_or_repo, _ = split_uri(value)
        # Local paths are normalized so "/a/b/" and "/a/./b" are the same location.
        return os.path.normpath(path_or_repo) if kind == "local" else value

    @property
    def kind(self) -> Literal["local", "hub", "elsewhere"]:
        return split_uri(self.uri)[0]

    @property
    def path_or_repo(self) -> str:
        return split_uri(self.uri)[1]

    @property
    def revision(self) -> str | None:
        return split_uri(self.uri)[2]


class Location(LocationRef):
    """A copy of a drafter and when the registry learned of it."""

    added_at: UTCDateTime = Field(default_factory=utcnow)

    @field_validator("uri")
    @classmethod
    def _a_copy_here(cls, value: str) -> str:
        return copy_uri(value)

    @classmethod
    def local(cls, path: str | os.PathLike[str], layout: str) -> Location:
        return cls(layout=layout, uri=os.path.abspath(os.fspath(path)))

    @classmethod
    def hub(cls, repo_id: str, layout: str, revision: str | None = None) -> Location:
        uri = f"{HUB_SCHEME}{repo_id}" + (f"@{revision}" if revision else "")
        return cls(layout=layout, uri=uri)


class LineageEdge(_Model):
    """One conversion: `dest` was written from `source` by `tool`.

    `kind` "convert": the same weights in another layout. "restate": the same, with capture layers stated by
    --capture-layers against what config.json or a record said. "cast": `dest` holds other weights, a dtype
    change of the drafter `derived_from` (its id) at `source`, so `dest` is a new drafter derived from that one.
    "finetune": `dest` was trained further from the drafter `derived_from` at `source` (registry add --parent)."""

    source: LocationRef
    dest: LocationRef
    tool: NonBlank
    created_at: UTCDateTime = Field(default_factory=utcnow)
    kind: Literal["convert", "restate", "cast", "finetune"] = "convert"
    derived_from: DrafterId | None = None

    @field_validator("source", "dest", mode="before")
    @classmethod
    def _strip_timestamp(cls, value: object) -> object:
        # A Location is accepted as an endpoint; only its uri and layout belong to the edge.
        if isinstance(value, LocationRef):
            return {"layout": value.layout, "uri": value.uri}
        return value

    @model_validator(mode="after")
    def _not_a_loop(self) -> LineageEdge:
        if self.source == self.dest:
            raise ValueError(f"a lineage edge cannot lead from {self.source.uri} to itself")
        if (self.kind in ("cast", "finetune")) != (self.derived_from is not None):
            raise ValueError("a cast or finetune edge names the drafter it derives from, and only such an edge does")
        return self


SHA256_HEX = re.compile(r"[0-9a-f]{64}")  # a sha256 digest as the registry and the HF cache spell it


def sha256_value(value: str) -> str:
    if not SHA256_HEX.fullmatch(value):
        raise ValueError(f"a sha256 digest is 64 lowercase hex characters, got {value!r}")
    return value


class ScanCandidate(_Model):
    """One set of capture boundaries `verify --scan-layers` measured on the same run's decoded text, with what it
    is (its labels: as measured, the record's, a neighbour)."""

    boundaries: list[NonNegativeInt]
    labels: list[str]
    mean_accepted_length: float = Field(ge=0)
    per_position: list[Annotated[float, Field(ge=0, le=1)]]


class Acceptance(_Model):
    """One `verify` measurement of a drafter with a target: greedy, the target's own text on a prompt set.

    mean_accepted_length counts the bonus token (tokens per target forward: 1 = no draft accepted, k+1 = all);
    per_position[j-1] is the share of draft rounds that accepted draft j."""

    target_name_or_path: NonBlank
    target_revision: str | None = None
    prompts_sha256: Annotated[str, AfterValidator(sha256_value)]
    prompts: PositiveInt
    max_new_tokens: PositiveInt
    k: PositiveInt
    capture_boundaries: list[NonNegativeInt]
    mean_accepted_length: float = Field(ge=0)
    per_position: list[Annotated[float, Field(ge=0, le=1)]]
    rounds: NonNegativeInt
    tokens_per_second: float = Field(ge=0)
    device: NonBlank
    tool: NonBlank
    measured_at: UTCDateTime = Field(default_factory=utcnow)
    scan: list[ScanCandidate] | None = None  # `verify --scan-layers`: this run's layers ranked, best first

    @model_validator(mode="after")
    def _one_rate_per_draft(self) -> Acceptance:
        if len(self.per_position) != self.k:
            raise ValueError(f"per_position holds {len(self.per_position)} rates for k = {self.k}")
        return self


class RecordChange(_Model):
    """One change made to a recorded fact: which, from what to what, why (the command that said so), by which
    tool and when. A record changes only when the user says so; every change is kept."""

    field: NonBlank
    old: Any = None
    new: Any = None
    reason: NonBlank
    tool: NonBlank
    changed_at: UTCDateTime = Field(default_factory=utcnow)


class DrafterRecord(_Model):
    """Everything the registry knows about one drafter.

    `drafter_id` is a digest of the weights (fingerprint.py), computed by the caller; it is the same
    for every layout and config the drafter is written with.
    """

    drafter_id: DrafterId
    target: TargetIdentity | None = None
    # None: the engine default boundaries (docs/formats.md §4), not "unknown".
    capture_boundaries: list[NonNegativeInt] | None = None
    # engine/convention -> ids as that layout's config spells them, e.g.
    # {"speculators": [2, 4, 5], "sglang": [1, 3, 4]}
    ids_as_written: dict[NonBlank, list[int]] = Field(default_factory=dict)
    draft_vocab_size: PositiveInt | None = None
    vocab_size: PositiveInt | None = None
    hidden_size: PositiveInt | None = None
    flags: dict[NonBlank, bool] = Field(default_factory=dict)
    trained_with: str | None = None
    # how drafter_id was computed: "content" (fingerprint.py: the weights), "hub-fingerprint" (registry sync, no
    # weights), or "config-and-weights" (before schema v5: merged into its weights id when a copy is read again)
    id_kind: Literal["content", "hub-fingerprint", "config-and-weights"] = "content"
    # what kind of drafter (drafter.KINDS): EAGLE-3, P-EAGLE, or the block-diffusion DFlash and DSpark
    drafter_kind: Literal["eagle3", "peagle", "dflash", "dspark", "dflash2"] = "eagle3"
    # a quantized drafter's scheme (quantization.QuantScheme: method, algo, group size, KV algo); None: plain
    quantization: dict[str, Any] | None = None
    created_at: UTCDateTime = Field(default_factory=utcnow)
    updated_at: UTCDateTime = Field(default_factory=utcnow)
    locations: list[Location] = Field(default_factory=list)
    lineage: list[LineageEdge] = Field(default_factory=list)
    changes: list[RecordChange] = Field(default_factory=list)  # oldest first

    @field_validator("target")
    @classmethod
    def _target_shape_positive(cls, target: TargetIdentity | None) -> TargetIdentity | None:
        # pydantic's own error, under target.<field>, when a depth or width is not positive
        if target is not None:
            _TARGET_SHAPE.validate_python({key: getattr(target, key) for key in RECORDED_TARGET[3:6]})
        return target

    @field_serializer("target")
    def _recorded_target(self, target: TargetIdentity | None) -> dict[str, object] | None:
        return None if target is None else {key: getattr(target, key) for key in RECORDED_TARGET}
