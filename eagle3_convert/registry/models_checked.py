"""The pydantic twins of the registry's record models (models.py): the reference they are checked by.

Imported only when a value is not one the plain models take as given (eagle3_convert/plainmodel.py): then
these validate, coerce or raise pydantic's ValidationError, exactly as the records did when they were these
classes. Same names (a ValidationError's first line names the class), same fields, same order. Capture
boundaries are the canonical form of docs/formats.md §4; `ids_as_written` keeps the ids each engine's config
actually spelled.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

from .models import as_utc, copy_uri, drafter_id_value, non_blank, split_uri, utcnow

UTCDateTime = Annotated[datetime, AfterValidator(as_utc)]
DrafterId = Annotated[str, AfterValidator(drafter_id_value)]
NonBlank = Annotated[str, AfterValidator(non_blank)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetInfo(_Model):
    """The target (verifier) model a drafter was trained against."""

    name_or_path: str | None = None
    revision: str | None = None
    architectures: list[str] = Field(default_factory=list)
    num_hidden_layers: PositiveInt | None = None
    hidden_size: PositiveInt | None = None
    vocab_size: PositiveInt | None = None


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


class Location(LocationRef):
    """A copy of a drafter and when the registry learned of it."""

    added_at: UTCDateTime = Field(default_factory=utcnow)

    @field_validator("uri")
    @classmethod
    def _a_copy_here(cls, value: str) -> str:
        return copy_uri(value)


class LineageEdge(_Model):
    """One conversion: `dest` was written from `source` by `tool`."""

    source: LocationRef
    dest: LocationRef
    tool: NonBlank
    created_at: UTCDateTime = Field(default_factory=utcnow)

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
        return self


class DrafterRecord(_Model):
    """Everything the registry knows about one drafter.

    `drafter_id` is a digest of the canonical config and tensor bytes, computed by the
    caller; it is the same for every layout the drafter is written in.
    """

    drafter_id: DrafterId
    target: TargetInfo | None = None
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
    # how drafter_id was computed: "content" (fingerprint.py) or "hub-fingerprint" (registry sync, no weights)
    id_kind: Literal["content", "hub-fingerprint"] = "content"
    created_at: UTCDateTime = Field(default_factory=utcnow)
    updated_at: UTCDateTime = Field(default_factory=utcnow)
    locations: list[Location] = Field(default_factory=list)
    lineage: list[LineageEdge] = Field(default_factory=list)
