"""The JSON Schemas of every layout's config.json: valid draft 2020-12, satisfied by every
config our writers emit and by the peers' own samples, violations named by JSON path, and
kept from drifting away from the pydantic model and the layout modules' constants."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from builders import LAYOUTS, DrafterSpec, build_drafter, config_for, expected_refusal
from conftest import DATA
from eagle3_convert.convert import read_source
from eagle3_convert.converters import base, config_keys, eagle, modelopt, sglang, speculators, vllm
from eagle3_convert.converters.base import ConvertOptions
from eagle3_convert.converters.registry import get_layout, layouts
from eagle3_convert.drafter import FAMILY_BY_MODEL_TYPE, DrafterConfig
from eagle3_convert.errors import FormatError, RefusalError
from eagle3_convert.schemas import layouts_with_schema, load_schema, violations

FLAG_FIELDS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")


def properties(name: str) -> dict[str, Any]:
    return load_schema(name)["properties"]


def contains_enum(name: str) -> set[str]:
    return set(properties(name)["architectures"]["contains"]["enum"])


def test_every_layout_has_a_valid_draft_2020_12_schema():
    assert set(layouts()) <= set(layouts_with_schema())
    for name in [*layouts_with_schema(), "decoder"]:
        schema = load_schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


# ------------------------------------------------------------ what our writers emit

def writer_configs(spec: DrafterSpec, work: Path) -> dict[str, dict[str, Any]]:
    """The config.json each layout's writer plans for `spec` (read from a layout that holds it)."""
    source = next(layout for layout in ("vllm", "speculators", "modelopt", "sglang")
                  if expected_refusal(layout, spec) is None)
    path = build_drafter(work / "src", source, spec)
    drafter = read_source(str(path)).drafter
    target = base.TargetIdentity(name_or_path="org/target", num_hidden_layers=spec.target_layers,
                                 model_type=spec.target_model_type)
    out = {}
    for name in LAYOUTS:
        try:
            out[name] = get_layout(name).plan(drafter, ConvertOptions(verifier=target, target=target)).config
        except RefusalError:
            continue
    return out


SPECS = [
    DrafterSpec(),
    DrafterSpec(draft_vocab_size=None, capture_boundaries=None),
    DrafterSpec(num_aux=2, capture_boundaries=(2, 5), target_hidden_size=48),
    DrafterSpec(num_layers=3, family="qwen3", norm_before_residual=True, norm_before_fc=True),
    DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3", fc_norm=True),
    DrafterSpec(attention_bias=True, embed_tokens=True, norm_output=True, capture_boundaries=(0, 4, 7)),
    DrafterSpec(modelopt_hf_trained=True),
]


@pytest.mark.parametrize("spec", SPECS, ids=range(len(SPECS)))
def test_configs_our_writers_emit_satisfy_their_layout_schema(spec: DrafterSpec, tmp_path: Path):
    configs = writer_configs(spec, tmp_path)
    assert configs, "no layout can hold this drafter"
    for name, config in configs.items():
        assert violations(name, config) == [], name
        # every key a writer emits is one the schema types (nothing it would let through unchecked)
        assert set(config) <= set(properties(name)) | set(properties("decoder")), \
            (name, sorted(set(config) - set(properties(name)) - set(properties("decoder"))))


spec_strategy = st.builds(
    DrafterSpec,
    family=st.sampled_from(["llama", "qwen3", "deepseek_mla"]),
    num_layers=st.integers(1, 3),
    draft_vocab_size=st.sampled_from([None, 16, 32]),
    num_aux=st.integers(1, 4),
    norm_before_residual=st.booleans(), norm_before_fc=st.booleans(), fc_norm=st.booleans(),
    norm_output=st.booleans(), attention_bias=st.booleans(), embed_tokens=st.booleans(),
    target_hidden_size=st.sampled_from([None, 48]),
).map(lambda s: s.with_(capture_boundaries=tuple(sorted({2, 4, 5, 1, 6, 0}))[:s.num_aux],
                        target_model_type="deepseek_v3" if s.family == "deepseek_mla" else "llama"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=spec_strategy)
def test_any_drafter_our_writers_can_hold_satisfies_every_schema(spec: DrafterSpec):
    if all(expected_refusal(layout, spec) is not None for layout in ("vllm", "speculators", "modelopt", "sglang")):
        return
    with tempfile.TemporaryDirectory() as work:
        for name, config in writer_configs(spec, Path(work)).items():
            assert violations(name, config) == [], (name, violations(name, config))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_layouts_as_the_peers_spell_them_satisfy_the_schema(layout: str):
    """builders.py writes each layout from docs/formats.md, independently of our writers."""
    for spec in SPECS:
        if expected_refusal(layout, spec) is None:
            assert violations(layout, config_for(layout, spec)) == [], spec


@pytest.mark.parametrize("name,layout", [("specforge-sglang", "sglang"), ("speculators-trained", "speculators"),
                                         ("speculators-fullvocab-qwen3", "speculators"), ("eagle-original", "eagle"),
                                         ("h8-sglang-ids-toplevel-only", "sglang")])
def test_peer_written_configs_satisfy_the_schema(name: str, layout: str):
    config = json.loads((DATA / name / "checkpoint" / "config.json").read_text())
    assert violations(layout, config) == []


# ------------------------------------------------------------ violations name their JSON path

def test_violations_are_reported_with_their_json_path():
    config = json.loads((DATA / "specforge-sglang" / "checkpoint" / "config.json").read_text())
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, "3", -2]
    del config["draft_vocab_size"]
    config["target_hidden_size"] = None
    paths = {v.path for v in violations("sglang", config)}
    assert paths == {"$.eagle_config.eagle_aux_hidden_state_layer_ids[1]",
                     "$.eagle_config.eagle_aux_hidden_state_layer_ids[2]",
                     "$.draft_vocab_size", "$.target_hidden_size"}

    spec = json.loads((DATA / "speculators-trained" / "checkpoint" / "config.json").read_text())
    spec["model_type"] = "llama"
    spec["fc_norm"] = True  # norm_before_fc is true too
    spec["transformer_layer_config"]["hidden_size"] = 0
    found = {v.path: v.message for v in violations("speculators", spec)}
    assert set(found) == {"$.model_type", "$", "$.transformer_layer_config.hidden_size"}
    assert "ABSENCE of a top-level model_type" in found["$.model_type"]
    assert "mutually exclusive" in found["$"]


def test_a_layout_without_a_schema_has_no_violations_to_report():
    assert violations("no-such-layout", {}) is None


# ------------------------------------------------------------ no drift from the code

def test_schemas_agree_with_the_layout_constants():
    assert contains_enum("sglang") == set(sglang.ARCHITECTURE.values())
    assert contains_enum("vllm") == set(vllm.CLASS_FAMILY) | vllm.PLAIN_BASES
    assert contains_enum("modelopt") >= set(modelopt.ARCHITECTURE.values())
    assert contains_enum("eagle") >= set(eagle.ARCHITECTURES)
    assert set(properties("modelopt")["eagle_config"]["properties"]) == \
        set(base.MODELOPT_EAGLE_FIELDS) | set(modelopt.NESTED_MODELED)
    assert set(properties("vllm")["eagle_config"]["properties"]) == set(vllm.NESTED_MODELED)
    # any spelling: a flat config's family follows its architecture (phi3, kimi_k2 on a Llama-class drafter)
    assert properties("decoder")["model_type"]["type"] == "string"
    assert set(properties("speculators")["transformer_layer_config"]["properties"]["model_type"]["enum"]) <= \
        set(FAMILY_BY_MODEL_TYPE)
    assert set(properties("decoder")) >= config_keys.DECODER_SEMANTIC | set(base.TOP_KEYS)
    assert set(properties("speculators")) >= speculators.MODELED
    for name, module in (("sglang", sglang), ("vllm", vllm), ("eagle", eagle), ("modelopt", modelopt)):
        assert set(properties(name)) | set(properties("decoder")) >= module.MODELED, name


def test_schemas_agree_with_the_pydantic_model():
    """Every flag DrafterConfig models is a boolean where a layout can write it; every decoder field is typed."""
    fields = DrafterConfig.model_fields
    assert set(FLAG_FIELDS) <= set(fields) and all(fields[f].annotation is bool for f in FLAG_FIELDS)
    for name in ("speculators", "vllm"):
        assert all(properties(name)[flag] == {"type": "boolean"} for flag in FLAG_FIELDS), name
    for flag in ("norm_before_fc", "fc_norm", "norm_output"):
        assert properties("sglang")[flag] == {"type": "boolean"}
    decoder = properties("decoder")
    for field in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size"):
        assert fields[field].metadata, field  # gt=0 in the model ...
        assert decoder[field] == {"$ref": "#/$defs/positive"}, field  # ... minimum 1 in the schema
    for field in ("draft_vocab_size",):
        assert properties("eagle")[field] == {"$ref": "decoder.json#/$defs/positive"}
    assert fields["capture_boundaries"].annotation == (list[int] | None)
    assert load_schema("decoder")["$defs"]["boundary_ids"]["items"] == {"type": "integer", "minimum": 0}


def test_the_key_table_takes_its_types_from_the_schemas():
    """converters/config_keys checks the JSON type of a semantic key with the type the schemas give it: a key
    a layout reads keeps its type check only while a schema types it, and a value of that type passes."""
    from eagle3_convert.schemas import config_key_types

    read = config_keys.SEMANTIC_AT_ANY_LEVEL - config_keys.TYPED_BY_DECODER_FIELDS
    untyped = read - set(config_keys.type_checks())
    assert untyped == {"mrope_section", "mrope_interleaved"}  # no schema types them: no check, none lost
    assert config_keys.type_checks()["rope_theta"][1:] == ("a number", True)  # null in a rope object: absent
    assert config_key_types()["parallel_draft_step"].kind == "positive"
    assert config_key_types()["use_aux_hidden_state"].kind == "boolean"  # typed in sglang, a const true elsewhere

    config = config_for("sglang", DrafterSpec())
    config["rope_scaling"] = {"rope_type": "llama3", "factor": "8", "original_max_position_embeddings": None}
    issues = config_keys.key_issues("sglang", config)
    assert [(i.code, i.where) for i in issues] == [("E-CONFIG-FIELD", "$.rope_scaling.factor")]
    assert "expects a number" in issues[0].message
    # the schema says the same of the same place (validate names it once: the key table's finding)
    assert [v.path for v in violations("sglang", config)] == ["$.rope_scaling.factor"]
    config["rope_scaling"]["factor"] = 8.0
    assert config_keys.key_issues("sglang", config) == [] and violations("sglang", config) == []


def test_the_decoder_reader_takes_its_types_from_the_decoder_schema():
    """base.decoder_fields types the optional decoder keys as decoder.json does (an exclusiveMinimum of 0 makes
    "a positive number"), before coercion could read "false" as true or a string as a width."""
    checks = config_keys.decoder_type_checks()
    assert set(checks) == {"num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                           "partial_rotary_factor", "hidden_act", "rope_parameters", "rope_scaling", "attention_bias",
                           "mlp_bias", "tie_word_embeddings"}
    config = config_for("sglang", DrafterSpec())
    for key, value, expected in (("rope_theta", 0, "a positive number"), ("attention_bias", "false", "true or false"),
                                 ("head_dim", 8.0, "a positive integer"), ("rope_scaling", [], "an object")):
        with pytest.raises(FormatError, match=f"{key} is .*; expected {expected}$"):
            base.decoder_fields({**config, key: value}, "config.json")
    assert base.decoder_fields({**config, "head_dim": None, "rope_theta": 1e6}, "config.json")["head_dim"] is None
