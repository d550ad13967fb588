"""schemas.quick (issue 16): the verdict that lets validate/inspect skip jsonschema agrees with jsonschema.

Its True skips jsonschema, so it must never call valid what jsonschema refuses; its False and None hand the
config to jsonschema. Checked on every layout's built config (each family, flags and capture ids), every
config.json under tests/data and examples, and on mutations of each: every key at every depth removed and set
to values of every JSON type (including 1.0, true for 1, empty and long lists).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft202012Validator  # noqa: F401  (the reference the schemas module uses)

from builders import LAYOUTS, DrafterSpec, config_for
from eagle3_convert import schemas
from eagle3_convert.schemas.quick import valid

REPO = Path(__file__).resolve().parent.parent
VALUES: list[Any] = [None, True, False, 0, 1, -1, -2, 2, 1.0, 0.5, "", "llama", "eagle3", [], [0], [-1], [1, 2, 3],
                     [1.5], ["x"], {}, {"use_aux_hidden_state": True}]
FEWER: list[Any] = [None, True, 0, 1.0, "", [], [0], {}]  # for the stored configs, each checked as every layout


def configs() -> Iterator[tuple[str, str, dict[str, Any], list[Any]]]:
    specs = [DrafterSpec(), DrafterSpec(family="qwen3", draft_vocab_size=None, norm_before_fc=True, fc_norm=True),
             DrafterSpec(family="deepseek_mla"), DrafterSpec(capture_boundaries=None, target_hidden_size=64),
             DrafterSpec(modelopt_hf_trained=True, norm_output=True, norm_before_residual=True)]
    for i, spec in enumerate(specs):
        for layout in LAYOUTS:
            yield f"built-{i}-{layout}", layout, config_for(layout, spec), VALUES
    files = [*(REPO / "tests" / "data").rglob("*.json"), *(REPO / "examples").rglob("config.json")]
    for path in sorted(files):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "targets" not in path.parts and "output" not in path.parts:
            for layout in schemas.layouts_with_schema():
                yield f"{path.relative_to(REPO)}-as-{layout}", layout, data, FEWER


def mutations(config: dict[str, Any], values: list[Any]) -> Iterator[dict[str, Any]]:
    def paths(node: Any, prefix: tuple) -> Iterator[tuple]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield (*prefix, key)
                yield from paths(value, (*prefix, key))
        elif isinstance(node, list):
            for i, value in enumerate(node[:3]):
                yield (*prefix, i)
                yield from paths(value, (*prefix, i))

    for path in paths(config, ()):
        for value in [..., *values]:  # ...: remove the key
            out = copy.deepcopy(config)
            node = out
            for part in path[:-1]:
                node = node[part]
            if value is ...:
                if isinstance(node, dict):
                    del node[path[-1]]
                else:
                    continue
            else:
                node[path[-1]] = copy.deepcopy(value)
            yield out


def reference(layout: str, config: Any) -> bool:
    return not any(True for _ in schemas._validator(layout).iter_errors(config))


@pytest.mark.parametrize("name,layout,config,values", list(configs()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_the_quick_verdict_is_jsonschemas(name: str, layout: str, config: dict[str, Any], values: list[Any]) -> None:
    undecided = 0
    for candidate in [config, *mutations(config, values)]:
        verdict = valid(layout, candidate, schemas.load_schema)
        if verdict is None:
            undecided += 1
            continue
        assert verdict == reference(layout, candidate), json.dumps(candidate)[:2000]
    assert undecided == 0  # every keyword our schemas use is decided here: no config pays for jsonschema


def test_violations_are_unchanged_by_the_quick_path() -> None:
    """A valid config reports nothing; an invalid one gets jsonschema's own words, as before."""
    good = config_for("sglang", DrafterSpec())
    assert schemas.violations("sglang", good) == []
    bad = {**good, "draft_vocab_size": 0}
    assert [v.path for v in schemas.violations("sglang", bad)] == ["$.draft_vocab_size"]
