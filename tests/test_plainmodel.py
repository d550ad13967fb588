"""drafter.DrafterConfig / TargetIdentity (plain models, issue 16) hold what their pydantic twins hold.

For a valid config and every field of it set to values of every kind (exact, coercible, refused), the plain
model and its twin (drafter_checked) either both accept, holding the same values and dumping the same data in
both modes, or both refuse with the same ValidationError text. The header path imports no pydantic.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from eagle3_convert import drafter, drafter_checked
from eagle3_convert.plainmodel import is_validation_error

MLA = {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}
BASE: dict[str, Any] = {
    "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 96, "draft_vocab_size": 32, "head_dim": 8, "rope": {"rope_theta": 10000.0},
    "capture_boundaries": [2, 4, 5], "target": {"name_or_path": "org/t", "architectures": ["LlamaForCausalLM"]},
    "hf_extra": {"a": [1, {"b": (1, 2)}]}, "layout_extra": {"sglang": {"x": 1}},
}
VALUES: list[Any] = [None, True, False, 0, 1, -1, 2, 1.0, 1.5, float("inf"), "3", "llama", "deepseek_mla", "qwen3",
                     [], [1], [1, "2"], [True], (1, 2), {}, {"k": 1}, {"k": True}, {1: 2}, {"k": {"j": 1}}, MLA,
                     {"name_or_path": 3}, {"architectures": ["x"]}, b"x"]


def outcome(cls: Any, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        obj = cls(**data)
    except ValidationError as exc:
        return "refused", str(exc)
    return "ok", (obj.model_dump(), obj.model_dump(mode="json"), obj.model_dump(exclude={"hf_extra", "target"}))


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    out = [("base", "DrafterConfig", BASE), ("mla", "DrafterConfig", {**BASE, "family": "deepseek_mla", "mla": MLA}),
           ("empty", "TargetIdentity", {})]
    for name in drafter.DrafterConfig.FIELDS:
        out.append((f"drop-{name}", "DrafterConfig", {k: v for k, v in BASE.items() if k != name}))
        for i, value in enumerate(VALUES):
            out.append((f"{name}-{i}", "DrafterConfig", {**BASE, name: value}))
    for name in drafter.TargetIdentity.FIELDS:
        for i, value in enumerate(VALUES):
            out.append((f"target-{name}-{i}", "TargetIdentity", {name: value}))
    out.append(("unknown-key", "DrafterConfig", {**BASE, "nope": 1}))
    return out


@pytest.mark.parametrize("name,cls,data", cases(), ids=lambda v: v if isinstance(v, str) and "-" in v else "")
def test_plain_model_and_its_pydantic_twin_agree(name: str, cls: str, data: dict[str, Any]) -> None:
    assert outcome(getattr(drafter, cls), data) == outcome(getattr(drafter_checked, cls), data)


def test_the_fields_are_the_twins_in_its_order() -> None:
    for cls in ("DrafterConfig", "TargetIdentity"):
        plain, twin = getattr(drafter, cls), getattr(drafter_checked, cls)
        assert list(plain.FIELDS) == list(twin.model_fields)
        for name, (default, factory, _) in plain.FIELDS.items():
            field = twin.model_fields[name]
            assert (factory, default if factory is None and field.is_required() is False else None) == \
                   (field.default_factory, field.default if field.default_factory is None and not field.is_required()
                    else None), name


def test_the_pydantic_api_this_code_uses() -> None:
    cfg = drafter.DrafterConfig(**BASE)
    twin = drafter_checked.DrafterConfig(**BASE)
    assert cfg.model_copy(update={"capture_boundaries": [1]}).capture_boundaries == [1] and cfg.capture_boundaries
    assert drafter.DrafterConfig.model_validate(cfg) is cfg
    assert drafter.DrafterConfig.model_validate(cfg.model_dump()) == cfg
    as_json = twin.model_dump(mode="json")
    assert drafter.DrafterConfig.model_validate(as_json).model_dump() == \
        drafter_checked.DrafterConfig.model_validate(as_json).model_dump()
    assert repr(cfg) == repr(twin)
    assert isinstance(cfg.target, drafter.TargetIdentity) and dict(cfg)["hidden_size"] == 32
    with pytest.raises(ValidationError) as err:
        drafter.DrafterConfig.model_validate([1])
    assert is_validation_error(err.value) and not is_validation_error(ValueError("x"))
    assert drafter.TargetIdentity.merged(drafter.TargetIdentity(name_or_path="a"),
                                         drafter.TargetIdentity(revision="r", architectures=["X"])).model_dump() == \
        {**drafter.TargetIdentity().model_dump(), "name_or_path": "a", "revision": "r", "architectures": ["X"]}


def test_a_valid_config_imports_no_pydantic() -> None:
    code = ("import sys; from eagle3_convert.drafter import DrafterConfig; "
            f"c = DrafterConfig(**{BASE!r}); c.model_dump(mode='json'); c.model_copy(update={{}}); "
            "assert 'pydantic' not in sys.modules, 'pydantic imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
