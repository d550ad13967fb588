"""Every verdict is for a release (issue 23): the engine modules state which releases read each fact which way,
the user names a release (`--engine sglang==0.5.11`) or a fleet (repeated --engine, $EAGLE3_ENGINES), and where
the releases we know disagree, convert and validate say so in one line. Real CLI, real files (tests/builders.py).

The release boundaries themselves were read in the engines' wheels (engines/sglang.py, engines/vllm.py name the
releases on each side); the engine tier (tests/test_engines.py) loads SGLang 0.5.11 and 0.5.23 on the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter, config_for, stored_tensors, write_safetensors, write_target
from conftest import run_cli

from eagle3_convert.capture_ids import engine_boundaries, ids_for_engine
from eagle3_convert.engines import llamacpp, sglang, speculators, trtllm, vllm
from eagle3_convert.engines.releases import _key

MODULES = (speculators, vllm, sglang, trtllm, llamacpp)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_change_names_its_source_and_a_known_first_release(module) -> None:
    releases = module.RELEASES
    assert module.RELEASE.endswith(releases.newest) or module is trtllm, (module.RELEASE, releases.newest)
    if len(releases.known) > 1:  # ascending as versions, not as strings
        keys = [_key(r) for r in releases.known]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for change in releases.changes:
        assert "PR " in change.source or ".py" in change.source, change
        assert change.since is None or change.since in releases.known, change
        assert change.before and change.after and change.fact


def test_releases_are_compared_as_versions_not_strings() -> None:
    # as strings "0.5.9" > "0.5.12"; as versions 0.5.9 is older than PR 24663 (first in 0.5.12)
    assert not sglang.RELEASES.reads(sglang.LAYERS_N, "0.5.9")
    assert sglang.RELEASES.reads(sglang.LAYERS_N, "0.5.12")
    assert not sglang.RELEASES.reads(sglang.DEEPSEEK_IDS_AS_IS, "0.5.12.post1")
    assert sglang.RELEASES.reads(sglang.DEEPSEEK_IDS_AS_IS, "0.5.13")
    assert not vllm.RELEASES.reads(vllm.SPECULATORS_EAGLE31_FLAGS, "0.24.0")
    assert vllm.RELEASES.reads(vllm.SPECULATORS_EAGLE31_FLAGS, "0.25.0")
    assert not vllm.RELEASES.reads(vllm.FOUR_TOP_LEVEL_IDS, None)  # an open PR is in no release
    assert sglang.RELEASES.knows("0.5.10.0") and not sglang.RELEASES.knows("0.5.24")


def test_the_layouts_write_the_ids_every_sglang_release_reads_alike_where_such_ids_exist() -> None:
    # DeepSeek targets: 0.5.13+ read [1, 3, 5] +1 (first id 1) as releases before PR 25454 do; the raw spelling
    # [2, 4, 6] would read as boundaries only on 0.5.13+
    ids = ids_for_engine("sglang", [2, 4, 6], "deepseek", 8)
    assert ids == [1, 3, 5]
    assert engine_boundaries("sglang", ids, "deepseek", 8) == engine_boundaries("sglang", ids, "default", 8)


def sglang_file_with_layers_0(root: Path, spec: DrafterSpec) -> Path:
    """An SGLang checkpoint whose midlayer.* is renamed layers.0.* (0.5.12+ load it; 0.5.11 and older do not)."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config_for("sglang", spec)))
    tensors = {name.replace("midlayer.", "layers.0."): t for name, t in stored_tensors("sglang", spec).items()}
    write_safetensors(root / "model.safetensors", tensors)
    return root


def validate(*args: object) -> tuple[int, dict]:
    done = run_cli("validate", "--json", *args)
    return done.exit_code, json.loads(done.stdout)


def codes(report: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in report["findings"]:
        out.setdefault(f["code"], []).append(f["message"])
    return out


def test_an_sglang_file_with_layers_0_fails_validate_for_releases_before_pr_24663(tmp_path: Path) -> None:
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
    src = sglang_file_with_layers_0(tmp_path / "layers0", spec)
    code, old = validate("--engine", "sglang==0.5.11", src)
    assert code == 1 and old.get("releases") == ["SGLang 0.5.11"], old
    assert any("SGLang 0.5.11" in m and "layers.0." in m for m in codes(old)["E-ENGINE-WRONG"]), old
    code, newest = validate("--engine", "sglang", src)
    assert code == 0 and newest["releases"] == ["SGLang 0.5.23"], newest
    [line] = codes(newest)["I-ENGINE-RELEASES"]  # passes for 0.5.23, and says which releases it fails on
    assert "served as trained on ≥ 0.5.12" in line and "served WRONG on 0.5.9–0.5.11" in line, line
    text = run_cli("validate", "--engine", "sglang==0.5.11", "--engine", "sglang", src)
    assert text.exit_code == 1 and "checked for: SGLang 0.5.11, 0.5.23" in text.stdout, text.stdout
    midlayer = build_drafter(tmp_path / "midlayer", "sglang", spec)  # the spelling every release loads
    code, report = validate("--engine", "sglang==0.5.11", midlayer)
    assert code == 0 and not {"E-ENGINE-WRONG", "I-ENGINE-RELEASES"} & set(codes(report)), report


def test_a_release_that_cannot_load_the_file_refuses_it(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(target_layers=8, num_layers=2,
                                                                capture_boundaries=(1, 3, 6)))
    code, report = validate("--engine", "sglang==0.5.11", src)
    [message] = codes(report)["E-ENGINE-REFUSES"]
    assert code == 1 and "SGLang 0.5.11 refuses this file" in message and "only supports 1 layer" in message
    [finding] = [f for f in report["findings"] if f["code"] == "E-ENGINE-REFUSES"]
    assert finding["hint"].startswith("upgrade to SGLang ≥ 0.5.12, which serves this file as trained"), finding
    code, report = validate("--engine", "sglang", src)
    assert code == 0 and "E-ENGINE-REFUSES" not in codes(report), report


@pytest.mark.parametrize("named,by,refused", [
    ("0.5.5", "SGLang 0.5.5 is older than the oldest release this tool models (0.5.9): judged by 0.5.9's rules", True),
    ("9.9.9", "SGLang 9.9.9 is newer than the newest release this tool models (0.5.23): judged by 0.5.23's rules",
     False),
    ("0.5.12rc1", "SGLang 0.5.12rc1 is not a release this tool models (it falls between 0.5.11 and 0.5.12): judged "
                  "by 0.5.11's rules", True),
    ("0.5.12+cu129", "SGLang 0.5.12+cu129 is not a release this tool models (it falls between 0.5.12 and "
                     "0.5.12.post1): judged by 0.5.12's rules", False)])
def test_a_release_this_tool_does_not_model_is_judged_by_the_nearest_and_says_so(
        named: str, by: str, refused: bool, tmp_path: Path) -> None:
    """Issue 34: a release outside the table (older, newer, between) was E-INTERNAL wherever the releases known
    disagree on the file (releases_that_serve indexed the known tuple with it); SGLang builds two layers from 0.5.12
    on, so each release named is refused or served as the known one below it reads the file, and says which."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(target_layers=8, num_layers=2,
                                                                capture_boundaries=(1, 3, 6)))
    code, report = validate("--engine", f"sglang=={named}", src)
    assert codes(report)["W-ENGINE-RELEASE-UNKNOWN"] == [by], report
    assert report["releases"] == [f"SGLang {named}"] and code == (1 if refused else 0), report
    assert ("E-ENGINE-REFUSES" in codes(report)) == refused, report
    text = run_cli("--to", "sglang", "--no-record", "--engine", f"sglang=={named}", src, tmp_path / "out")
    assert text.exit_code == (1 if refused else 0) and by in text.stdout + text.stderr, text.stderr
    assert "Traceback" not in text.stderr and "E-INTERNAL" not in text.stderr
    if not refused:
        code, doc = convert(src, tmp_path / "out-json", "--engine", f"sglang=={named}")
        assert doc["serves"]["sglang"]["release"] == named and doc["serves"]["sglang"]["judged_by"] == by.split(
            "judged by ")[1].split("'")[0], doc["serves"]["sglang"]


def test_vllm_releases_outside_the_table_were_an_internal_error(tmp_path: Path) -> None:
    """vLLM's releases read an SGLang file's nested ids in two ways: any release outside the table hit the index."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6)))
    for named in ("0.1.0", "99.0", "0.20.1rc1"):
        done = run_cli("validate", "--engine", f"vllm=={named}", src)
        assert done.exit_code in (0, 1) and "E-INTERNAL" not in done.stderr, done.stderr
        assert f"vLLM {named} is " in done.stdout and "'s rules" in done.stdout, done.stdout


def test_a_spelling_that_is_no_release_is_refused_with_the_known_range(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6)))
    bad = run_cli("validate", "--engine", "sglang==latest", src)
    assert bad.exit_code == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "'latest' is not a release number (the releases modelled: 0.5.9 to 0.5.23)" in bad.stderr, bad.stderr


def test_convert_of_a_fleet_refused_names_the_release_that_refuses(tmp_path: Path) -> None:
    """convert's refusal hint placed the fleet's joined releases ('0.5.11, 0.5.23') in the known tuple: E-INTERNAL."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(target_layers=8, num_layers=2,
                                                                capture_boundaries=(1, 3, 6)))
    done = run_cli("--to", "sglang", "--no-record", "--engine", "sglang==0.5.11", "--engine", "sglang", src,
                   tmp_path / "out")
    assert done.exit_code == 1 and "[E-ENGINE-REFUSES]" in done.stderr, done.stderr
    assert "hint: upgrade to SGLang ≥ 0.5.12, which serves this file as trained" in done.stderr, done.stderr


def test_the_fleet_comes_from_eagle3_engines_when_no_engine_is_named(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
    src = sglang_file_with_layers_0(tmp_path / "layers0", spec)
    monkeypatch.setenv("EAGLE3_ENGINES", "sglang==0.5.11, sglang")
    code, report = validate(src)
    assert code == 1 and report["releases"] == ["SGLang 0.5.11, 0.5.23"], report
    code, report = validate("--engine", "sglang", src)  # --engine wins over the fleet
    assert code == 0 and report["releases"] == ["SGLang 0.5.23"]
    monkeypatch.setenv("EAGLE3_ENGINES", "sglang==0.5.11,tgi")
    bad = run_cli("validate", src)
    assert bad.exit_code == 2 and "$EAGLE3_ENGINES: 'tgi' is not an engine" in bad.stderr, bad.stderr


def convert(src: Path, dest: Path, *args: object, layout: str = "sglang") -> tuple[int, dict]:
    done = run_cli("--to", layout, "--json", "--no-record", *args, src, dest)
    return done.exit_code, json.loads(done.stdout)


def test_convert_names_the_release_judged_and_warns_of_the_releases_no_spelling_serves(tmp_path: Path) -> None:
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6), fc_norm=True, norm_output=True)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target(tmp_path / "target", spec)
    code, doc = convert(src, tmp_path / "out", "--target", target)
    assert code == 0, doc
    serves = doc["serves"]["sglang"]
    assert serves["release"] == "0.5.23" and serves["verdict"] == "as-trained"
    assert [(s["releases"], s["verdict"]) for s in serves["releases"]] == [("≥ 0.5.12", "as-trained"),
                                                                          ("0.5.9–0.5.11", "wrong")]
    [warning] = [n for n in doc["notes"] if n.startswith("WARNING: SGLang")]
    assert "0.5.9–0.5.11 would serve this file wrong" in warning and "fc_norm" in warning
    text = run_cli("--to", "sglang", "--no-record", "--target", target, src, tmp_path / "out-text")
    assert "  SGLang 0.5.23 " in text.stdout and (
        "across releases: served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11") in text.stdout, text.stdout
    # the user's fleet runs 0.5.10: the layout's own engine would serve it wrong there, so nothing is written
    code, doc = convert(src, tmp_path / "out-old", "--target", target, "--engine", "sglang==0.5.10")
    assert code == 1 and doc["error"]["code"] == "E-ENGINE-WRONG" and not (tmp_path / "out-old").exists()


@pytest.mark.parametrize("boundaries,warned", [((2, 4, 6), False), ((3, 5, 7), True)])
def test_deepseek_ids_are_one_layer_off_before_pr_25454_unless_the_first_id_is_1(
        boundaries: tuple[int, ...], warned: bool, tmp_path: Path) -> None:
    spec = DrafterSpec(target_layers=8, capture_boundaries=boundaries, target_model_type="deepseek_v3")
    src = build_drafter(tmp_path / "src", "speculators", spec)
    code, doc = convert(src, tmp_path / "out", "--target", write_target(tmp_path / "target", spec))
    assert code == 0, doc
    spans = doc["serves"]["sglang"].get("releases", [])
    if warned:  # 0.5.23 reads [3, 5, 7] as boundaries; 0.5.12 and older add 1 (and cannot capture 8)
        assert [(s["first"], s["last"], s["verdict"]) for s in spans] == [
            ("0.5.13", "0.5.23", "as-trained"), ("0.5.9", "0.5.12.post1", "wrong")], spans
        assert any(n.startswith("WARNING: SGLang 0.5.9–0.5.12.post1") for n in doc["notes"]), doc["notes"]
    else:
        assert spans == [] and not any(n.startswith("WARNING") for n in doc["notes"]), doc


def test_a_fleet_is_judged_release_by_release(tmp_path: Path) -> None:
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6), fc_norm=True, norm_output=True)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    # vLLM's speculators path passes fc_norm and norm_output on from 0.25.0 (PR 46488)
    code, doc = convert(src, tmp_path / "out", "--verifier", "org/target", "--engine", "vllm==0.24.0", "--engine",
                        "vllm==0.25.0", layout="speculators")
    assert code == 0, doc
    v1 = doc["serves"]["vllm-v1"]
    assert v1["release"] == "0.24.0, 0.25.0" and v1["verdict"] == "refuses", v1  # the worst of the fleet
    assert [(j["release"], j["verdict"]) for j in v1["judged"]] == [("0.24.0", "refuses"), ("0.25.0", "as-trained")]


def test_search_judges_the_release_named(tmp_path: Path) -> None:
    from conftest import EXAMPLE

    registry = tmp_path / "registry.db"
    assert run_cli("--to", "vllm", "-q", "--registry", registry, EXAMPLE, tmp_path / "vllm").exit_code == 0
    done = run_cli("search", "--json", "--target", "example-org/tiny-llama-target", "--registry", registry,
                   "--engine", "sglang==0.5.11")
    assert done.exit_code == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["engines"] == ["sglang"]
    serves = {copy["uri"].rsplit("/", 1)[-1]: copy["serves"]["sglang"] for copy in found["drafters"][0]["copies"]}
    # our --to vllm output stores layers.0.*, which SGLang 0.5.11 skips; the speculators source SGLang refuses
    assert serves["vllm"]["release"] == "0.5.11" and serves["vllm"]["verdict"] == "wrong", serves
    text = run_cli("search", "--verbose", "--target", "example-org/tiny-llama-target", "--registry", registry,
                   "--engine", "sglang==0.5.11").stdout
    assert "    SGLang 0.5.11 " in text and "across releases: served as trained on ≥ 0.5.12" in text, text
