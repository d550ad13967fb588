"""registry.models (plain models, issue 16) hold what their pydantic twins (registry.models_checked) hold.

For valid records and every field of each set to values of every kind (exact, coercible, refused: times in
several spellings, uris, ids, keys to strip), the plain model and its twin either both accept, holding the
same values, dumping the same data in both modes and printing the same repr, or both refuse with the same
ValidationError text. A registry lookup imports no pydantic.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from eagle3_convert.registry import models, models_checked

T = "2024-05-06T07:08:09.123456+00:00"
LOC = {"layout": "sglang", "uri": "/data/d"}
EDGE = {"source": {"layout": "speculators", "uri": "/data/s"}, "dest": {"layout": "sglang", "uri": "/data/d"},
        "tool": "eagle3-convert 0.1", "created_at": T}
BASES: dict[str, dict[str, Any]] = {
    "TargetInfo": {"name_or_path": "org/t", "revision": "main", "architectures": ["LlamaForCausalLM"],
                   "num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 128256},
    "LocationRef": dict(LOC),
    "Location": {**LOC, "added_at": T},
    "LineageEdge": dict(EDGE),
    "DrafterRecord": {
        "drafter_id": "0123456789abcdef", "target": {"name_or_path": "org/t", "num_hidden_layers": 32},
        "capture_boundaries": [2, 16, 29], "ids_as_written": {"speculators": [2, 16, 29], "sglang": [1, 15, 28]},
        "draft_vocab_size": 32000, "vocab_size": 128256, "hidden_size": 4096, "flags": {"norm_output": True},
        "trained_with": "specforge", "created_at": T, "updated_at": "2024-05-06T07:08:10Z",
        "locations": [{**LOC, "added_at": T}], "lineage": [dict(EDGE)]},
}
TIMES: list[Any] = [T, "2024-05-06T07:08:09Z", "2024-05-06T07:08:09+00:00", "2024-05-06T07:08:09.123Z",
                    "2024-05-06T07:08:09.123456+02:00", "2024-05-06 07:08:09Z", "2024-05-06T07:08:09", "2024-05-06",
                    "2024-02-30T00:00:00Z", "2024-05-06T24:00:00Z", "2024-05-06T07:08:60Z", "0000-01-01T00:00:00Z",
                    datetime(2024, 5, 6, 7, 8, 9), datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=5))),
                    datetime(2024, 5, 6, tzinfo=timezone.utc), 1714979289, 1714979289.5, b"2024-05-06T07:08:09Z"]
VALUES: list[Any] = [None, True, False, 0, 1, -1, 2, 1.0, 1.5, "3", "", " ", "sglang", " sglang ", "/a/./b/", "/a/b",
                     "rel/p", "hf://org/name", "hf://org/name@rev", "hf://org/name@", "hf://org/name@ x", "hf://bad name",
                     "ABCDEF0123", " abcdef0123 ", "abc", "g" * 8, [], [1], [1, "2"], [True], [-1], ["x"], (1, 2), {},
                     {"k": 1}, {"k": True}, {" k ": True}, {"": True}, {"k": [1]}, {" k": [1]}, {"k": ["1"]},
                     {"k": [True]}, {1: 2}, dict(LOC), {**LOC, "added_at": T}, {"layout": "x", "uri": "rel"},
                     [{**LOC, "added_at": T}], [{**LOC, "added_at": "bad"}], [dict(EDGE)], [{**EDGE, "dest": EDGE["source"]}],
                     {"name_or_path": 3}, {"architectures": ["x"]}, b"x", *TIMES]


def outcome(module: Any, cls: str, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        obj = getattr(module, cls)(**data)
    except ValidationError as exc:
        return "refused", str(exc)
    return "ok", (obj.model_dump(), obj.model_dump(mode="json"), repr(obj))


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for cls, base in BASES.items():
        out.append((f"{cls}-base", cls, base))  # (a time left out is now: test_times_left_out_are_now_in_utc)
        for name in getattr(models, cls).FIELDS:
            if name not in ("created_at", "updated_at", "added_at"):  # dropped, they are now: below
                out.append((f"{cls}-drop-{name}", cls, {k: v for k, v in base.items() if k != name}))
            for i, value in enumerate(VALUES):
                out.append((f"{cls}-{name}-{i}", cls, {**base, name: value}))
        out.append((f"{cls}-unknown-key", cls, {**base, "nope": 1}))
    out.append(("LineageEdge-loop", "LineageEdge", {**EDGE, "dest": {"layout": "speculators", "uri": "/data/s/."}}))
    return out


@pytest.mark.parametrize("name,cls,data", cases(), ids=lambda v: v if isinstance(v, str) and "-" in v else "")
def test_plain_record_model_and_its_pydantic_twin_agree(name: str, cls: str, data: dict[str, Any]) -> None:
    assert outcome(models, cls, data) == outcome(models_checked, cls, data)


def test_the_fields_are_the_twins_in_its_order() -> None:
    for cls in BASES:
        plain, twin = getattr(models, cls), getattr(models_checked, cls)
        assert list(plain.FIELDS) == list(twin.model_fields), cls
        for name, (default, factory, _) in plain.FIELDS.items():
            field = twin.model_fields[name]
            assert factory == field.default_factory, (cls, name)
            assert field.is_required() == (factory is None and default is models.REQUIRED), (cls, name)
            if factory is None and not field.is_required():
                assert default == field.default, (cls, name)


def test_times_left_out_are_now_in_utc() -> None:
    before = datetime.now(timezone.utc)
    record = models.DrafterRecord(drafter_id="0123456789abcdef", locations=[LOC],
                                  lineage=[{k: v for k, v in EDGE.items() if k != "created_at"}])
    for when in (record.created_at, record.updated_at, record.locations[0].added_at, record.lineage[0].created_at):
        assert when.tzinfo is timezone.utc and before <= when <= datetime.now(timezone.utc)


def test_a_location_as_an_edge_endpoint_loses_its_timestamp() -> None:
    for module in (models, models_checked):
        src, dest = module.Location(**{**LOC, "uri": "/data/s", "added_at": T}), module.Location(**LOC, added_at=T)
        edge = module.LineageEdge(source=src, dest=dest, tool="t", created_at=T)
        assert type(edge.source).__name__ == "LocationRef" and edge.model_dump()["source"] == {"layout": "sglang",
                                                                                              "uri": "/data/s"}
        with pytest.raises(ValidationError, match="cannot lead from /data/d to itself"):
            module.LineageEdge(source=dest, dest=dest, tool="t")


def test_the_pydantic_api_this_code_uses() -> None:
    record = models.DrafterRecord(**BASES["DrafterRecord"])
    twin = models_checked.DrafterRecord(**BASES["DrafterRecord"])
    assert models.DrafterRecord.model_validate(record) is record
    assert models.DrafterRecord.model_validate(record.model_dump()) == record
    assert models.DrafterRecord.model_validate(twin.model_dump(mode="json")) == record
    assert record.model_copy(update={"trained_with": None}).trained_with is None and record.trained_with
    assert isinstance(record.locations[0], models.Location) and isinstance(record.lineage[0].source, models.LocationRef)
    assert record.target is not None and record.target.model_dump() == twin.target.model_dump()
    assert set(models.TargetInfo.FIELDS) == set(models_checked.TargetInfo.model_fields)
    hub = models.Location.hub("org/name", "sglang", "abc")
    assert (hub.kind, hub.path_or_repo, hub.revision) == ("hub", "org/name", "abc")
    assert models.Location.local("/a/./b/", "vllm").uri == "/a/b"


def test_a_registry_lookup_imports_no_pydantic(tmp_path) -> None:
    code = (
        "import sys\n"
        "from eagle3_convert.registry.store import open_registry\n"
        f"store = open_registry({str(tmp_path / 'r.db')!r})\n"
        f"store.upsert_drafter('0123456789abcdef', target={{'name_or_path': 'org/t'}}, capture_boundaries=[2, 4, 5],"
        f" locations=[{LOC!r}], lineage=[{EDGE!r}])\n"
        "record = store.get('0123')\n"
        "assert record.capture_boundaries == [2, 4, 5] and record.lineage and store.list()\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
