"""registry.models: what the registry's records accept, normalise and refuse."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from eagle3_convert.drafter import TargetIdentity
from eagle3_convert.registry import models

T = "2024-05-06T07:08:09.123456+00:00"
LOC = {"layout": "sglang", "uri": "/data/d"}
EDGE = {"source": {"layout": "speculators", "uri": "/data/s"}, "dest": {"layout": "sglang", "uri": "/data/d"},
        "tool": "eagle3-convert 0.1", "created_at": T}
RECORD: dict[str, Any] = {
    "drafter_id": "0123456789abcdef", "target": {"name_or_path": "org/t", "num_hidden_layers": 32},
    "capture_boundaries": [2, 16, 29], "ids_as_written": {"speculators": [2, 16, 29], "sglang": [1, 15, 28]},
    "draft_vocab_size": 32000, "vocab_size": 128256, "hidden_size": 4096, "flags": {"norm_output": True},
    "trained_with": "specforge", "created_at": T, "updated_at": "2024-05-06T07:08:10Z",
    "locations": [{**LOC, "added_at": T}], "lineage": [dict(EDGE)]}


def test_times_left_out_are_now_in_utc() -> None:
    before = datetime.now(timezone.utc)
    record = models.DrafterRecord(drafter_id="0123456789abcdef", locations=[LOC],
                                  lineage=[{k: v for k, v in EDGE.items() if k != "created_at"}])
    for when in (record.created_at, record.updated_at, record.locations[0].added_at, record.lineage[0].created_at):
        assert when.tzinfo is timezone.utc and before <= when <= datetime.now(timezone.utc)


def test_values_are_normalised_where_they_enter() -> None:
    record = models.DrafterRecord(**{**RECORD, "drafter_id": " ABCDEF0123 ", "flags": {" k ": True},
                                     "created_at": "2024-05-06T09:08:09+02:00",
                                     "locations": [{"layout": " vllm ", "uri": "/a/./b/"}]})
    assert record.drafter_id == "abcdef0123" and record.flags == {"k": True}
    assert record.created_at == datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    assert (record.locations[0].layout, record.locations[0].uri) == ("vllm", "/a/b")


@pytest.mark.parametrize("change,words", [
    ({"drafter_id": "abc"}, "a drafter id is 8 to 128 hex characters"),
    ({"capture_boundaries": [-1]}, "greater than or equal to 0"),
    ({"hidden_size": 0}, "greater than 0"),
    ({"flags": {"": True}}, "must not be empty"),
    ({"locations": [{"layout": "x", "uri": "rel"}]}, "a local location must be an absolute path"),
    ({"locations": [{"layout": "x", "uri": "hf://org/name@"}]}, "empty or blank revision"),
    ({"id_kind": "guess"}, "'content', 'hub-fingerprint' or 'config-and-weights'"),
    ({"nope": 1}, "Extra inputs are not permitted"),
])
def test_a_bad_value_is_refused_naming_why(change: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        models.DrafterRecord(**{**RECORD, **change})


def test_the_target_is_a_target_identity_kept_as_the_registry_columns() -> None:
    """One TargetIdentity: the record holds it, refuses a depth or width that is not positive (pydantic's own
    error, under target.<field>), and shows what its columns keep, in their order (model_type has none)."""
    record = models.DrafterRecord(**{**RECORD, "target": TargetIdentity(name_or_path="org/t", model_type="llama",
                                                                        num_hidden_layers=32)})
    assert isinstance(record.target, TargetIdentity) and record.target.model_type == "llama"
    assert list(record.model_dump(mode="json")["target"].items()) == [
        ("name_or_path", "org/t"), ("revision", None), ("architectures", []), ("num_hidden_layers", 32),
        ("hidden_size", None), ("vocab_size", None), ("aliases", []), ("config_sha256", None)]
    with pytest.raises(ValidationError) as refused:
        models.DrafterRecord(**{**RECORD, "target": {"name_or_path": "org/t", "hidden_size": 0}})
    first = refused.value.errors()[0]
    assert (first["loc"], first["msg"]) == (("target", "hidden_size"), "Input should be greater than 0")


def test_a_location_as_an_edge_endpoint_loses_its_timestamp() -> None:
    src, dest = models.Location(**{**LOC, "uri": "/data/s", "added_at": T}), models.Location(**LOC, added_at=T)
    edge = models.LineageEdge(source=src, dest=dest, tool="t", created_at=T)
    assert type(edge.source).__name__ == "LocationRef" and edge.model_dump()["source"] == {"layout": "sglang",
                                                                                          "uri": "/data/s"}
    with pytest.raises(ValidationError, match="cannot lead from /data/d to itself"):
        models.LineageEdge(source=dest, dest=dest, tool="t")


def test_the_pydantic_api_this_code_uses() -> None:
    record = models.DrafterRecord(**RECORD)
    assert models.DrafterRecord.model_validate(record) is record
    assert models.DrafterRecord.model_validate(record.model_dump()) == record
    assert models.DrafterRecord.model_validate(record.model_dump(mode="json")) == record
    assert record.model_copy(update={"trained_with": None}).trained_with is None and record.trained_with
    assert isinstance(record.locations[0], models.Location) and isinstance(record.lineage[0].source, models.LocationRef)
    hub = models.Location.hub("org/name", "sglang", "abc")
    assert (hub.kind, hub.path_or_repo, hub.revision) == ("hub", "org/name", "abc")
    assert models.Location.local("/a/./b/", "vllm").uri == "/a/b"
