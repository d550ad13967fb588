"""What the registry records about a drafter: the target it was trained on, its capture
boundaries, where copies of it live and what each copy was converted from.

Plain models (eagle3_convert/plainmodel.py, issue 16): a lookup in the registry builds its records without
importing pydantic. Each holds exactly what its pydantic twin in models_checked.py holds; a value the plain
checks do not take as given goes to the twin, which coerces it or raises its ValidationError word for word
(tests/test_registry_models.py). Storing them is store.py's job. Capture boundaries are the canonical form
of docs/formats.md §4 (b = index into Hugging Face `output_hidden_states`); `ids_as_written` keeps the ids
each engine's config actually spelled, because those differ between conventions for the same physical layers.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from typing import Any, Literal

from ..plainmodel import (REQUIRED, UNDECIDED, Check, PlainModel, exact, int_, list_of, literal, model, optional,
                          str_dict)

HUB_SCHEME = "hf://"
# A published sidecar names the uploader's local copies by directory name only (their paths stay private).
ELSEWHERE_SCHEME = "local:"
TWINS = "eagle3_convert.registry.models_checked"

# Hub repo ids: "name" (legacy, unowned) or "org/name".
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_HEX_ID = re.compile(r"[0-9a-f]{8,128}")
# The times the registry writes (schema.ts) and pydantic's JSON spells (Z); any other spelling goes to the twin.
_UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?(Z|\+00:00)")


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


# ------------------------------------------------------------------ field checks (plainmodel's, for these types)
def _utc_time(v: Any) -> Any:
    if type(v) is datetime:
        return as_utc(v)
    if type(v) is str and _UTC_TIME.fullmatch(v):
        try:
            return datetime.fromisoformat(v)  # +00:00 and Z: tzinfo is timezone.utc, as as_utc leaves it
        except ValueError:
            return UNDECIDED  # no such day or time: the twin words it
    return UNDECIDED


def _validated(fn: Any) -> Check:
    """A str field with an after-validator: its value, or the twin's turn when it raises."""
    def check(v: Any) -> Any:
        if type(v) is not str:
            return UNDECIDED
        try:
            return fn(v)
        except ValueError:
            return UNDECIDED
    return check


def _uri(value: str) -> str:
    kind, path_or_repo, _ = split_uri(value)
    # Local paths are normalized so "/a/b/" and "/a/./b" are the same location.
    return os.path.normpath(path_or_repo) if kind == "local" else value


def _keyed(values: Check) -> Check:
    """dict[NonBlank, ...]: keys already stripped and non-blank are kept; others go to the twin."""
    inner = str_dict(values)

    def check(v: Any) -> Any:
        out = inner(v)
        if out is UNDECIDED or any(not k or k != k.strip() for k in out):
            return UNDECIDED
        return out
    return check


_POSITIVE = optional(int_(0, gt=True))
_NON_BLANK = _validated(non_blank)
_OPTIONAL_STR = optional(exact(str))


class TargetInfo(PlainModel):
    """The target (verifier) model a drafter was trained against."""

    TWIN = (TWINS, "TargetInfo")
    FIELDS = {
        "name_or_path": (None, None, _OPTIONAL_STR),
        "revision": (None, None, _OPTIONAL_STR),
        "architectures": (REQUIRED, list, list_of(exact(str))),
        "num_hidden_layers": (None, None, _POSITIVE),
        "hidden_size": (None, None, _POSITIVE),
        "vocab_size": (None, None, _POSITIVE),
    }
    name_or_path: str | None
    revision: str | None
    architectures: list[str]
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None


class LocationRef(PlainModel):
    """Where one copy of a drafter lives, in which layout (no timestamp)."""

    TWIN = (TWINS, "LocationRef")
    FIELDS = {
        "layout": (REQUIRED, None, _NON_BLANK),
        "uri": (REQUIRED, None, _validated(_uri)),
    }
    layout: str
    uri: str

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

    TWIN = (TWINS, "Location")
    FIELDS = {**LocationRef.FIELDS, "uri": (REQUIRED, None, _validated(lambda v: _uri(copy_uri(v)))),
              "added_at": (REQUIRED, utcnow, _utc_time)}
    added_at: datetime

    @classmethod
    def local(cls, path: str | os.PathLike[str], layout: str) -> Location:
        return cls(layout=layout, uri=os.path.abspath(os.fspath(path)))

    @classmethod
    def hub(cls, repo_id: str, layout: str, revision: str | None = None) -> Location:
        uri = f"{HUB_SCHEME}{repo_id}" + (f"@{revision}" if revision else "")
        return cls(layout=layout, uri=uri)


class LineageEdge(PlainModel):
    """One conversion: `dest` was written from `source` by `tool`."""

    TWIN = (TWINS, "LineageEdge")
    FIELDS = {
        "source": (REQUIRED, None, model("LocationRef")),
        "dest": (REQUIRED, None, model("LocationRef")),
        "tool": (REQUIRED, None, _NON_BLANK),
        "created_at": (REQUIRED, utcnow, _utc_time),
    }
    source: LocationRef
    dest: LocationRef
    tool: str
    created_at: datetime

    @classmethod
    def _before(cls, data: dict[str, Any]) -> dict[str, Any]:
        # A Location is accepted as an endpoint; only its uri and layout belong to the edge.
        return {k: {"layout": v.layout, "uri": v.uri} if k in ("source", "dest") and isinstance(v, LocationRef)
                else v for k, v in data.items()}

    def check(self) -> bool:
        return self.source != self.dest  # else the twin: "a lineage edge cannot lead from ... to itself"


class DrafterRecord(PlainModel):
    """Everything the registry knows about one drafter.

    `drafter_id` is a digest of the canonical config and tensor bytes, computed by the
    caller; it is the same for every layout the drafter is written in.
    """

    TWIN = (TWINS, "DrafterRecord")
    FIELDS = {
        "drafter_id": (REQUIRED, None, _validated(drafter_id_value)),
        "target": (None, None, optional(model("TargetInfo"))),
        # None: the engine default boundaries (docs/formats.md §4), not "unknown".
        "capture_boundaries": (None, None, optional(list_of(int_(0)))),
        # engine/convention -> ids as that layout's config spells them, e.g. {"speculators": [2, 4, 5], "sglang": [1, 3, 4]}
        "ids_as_written": (REQUIRED, dict, _keyed(list_of(int_()))),
        "draft_vocab_size": (None, None, _POSITIVE),
        "vocab_size": (None, None, _POSITIVE),
        "hidden_size": (None, None, _POSITIVE),
        "flags": (REQUIRED, dict, _keyed(exact(bool))),
        "trained_with": (None, None, _OPTIONAL_STR),
        # how drafter_id was computed: "content" (fingerprint.py) or "hub-fingerprint" (registry sync, no weights)
        "id_kind": ("content", None, literal("content", "hub-fingerprint")),
        "created_at": (REQUIRED, utcnow, _utc_time),
        "updated_at": (REQUIRED, utcnow, _utc_time),
        "locations": (REQUIRED, list, list_of(model("Location"))),
        "lineage": (REQUIRED, list, list_of(model("LineageEdge"))),
    }
    drafter_id: str
    target: TargetInfo | None
    capture_boundaries: list[int] | None
    ids_as_written: dict[str, list[int]]
    draft_vocab_size: int | None
    vocab_size: int | None
    hidden_size: int | None
    flags: dict[str, bool]
    trained_with: str | None
    id_kind: str
    created_at: datetime
    updated_at: datetime
    locations: list[Location]
    lineage: list[LineageEdge]
