"""The engine modules' last word in validate (eagle3_convert/validate/engine.py, check_engine_verdicts and
_say_release_disagreement) word for word, where issue 26's mutation runs found it unpinned: which verdicts become
findings, once per engine, runner and release; which hint a refusal gets; the releases line once per engine.
Builder-written files (tests/builders.py) with one change each, judged by `validate_checkpoint` (what the CLI's
validate calls; tests/test_mutation_kills_validate.py's `judged`) or the real CLI; every finding compared in full:
code, severity, message, hint, where and the engine it names. Paths say {tmp}."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builders import DrafterSpec, build_drafter, config_for, stored_tensors, write_safetensors, write_target
from conftest import run_cli
from test_mutation_kills_validate import judged

# each names the engine it is for (hints.py offers it only where that engine serves what it writes)
TO_SGLANG = ("write the file the engine reads right: `eagle3-convert --engine sglang --to sglang {tmp}/drafter "
             "drafter-sglang`")
CAVEAT_HINT = ("serve it as the caveat says, or with an engine that reads the file in full: `eagle3-convert --engine "
               "vllm --to vllm {tmp}/drafter drafter-vllm`")
TO_VLLM = "write the file the engine reads right: `eagle3-convert --engine vllm --to vllm {tmp}/drafter drafter-vllm`"


def to_vllm_target(release: str) -> str:
    """Judged with the target given, for a release named: the conversion reads the file with it, as validate did,
    and is judged for that release."""
    return ("write the file the engine reads right: `eagle3-convert --target {tmp}/target --engine "
            f"vllm=={release} --to vllm {{tmp}}/drafter drafter-vllm`")


def without_nested_ids(config: dict[str, Any]) -> None:
    """A vLLM-layout config with its capture ids at the top level only (where vLLM reads them), none nested."""
    config["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")


def test_sglang_capturing_its_defaults_where_they_can_never_be_the_trained_layers_is_an_error(tmp_path: Path):
    """SGLang reads capture ids only nested: a vLLM file with its ids [1, 3, 6] at the top level alone gets SGLang's
    defaults {2, L//2, L-3}, which hold 2 on every target, so never [1, 3, 6]. Without --target validate's capture
    check only warns (the defaults' layers need the target's depth), and that warning used to count as the engine's
    fault said: validate passed a file SGLang certainly serves wrong. The verdict says it now, as an error."""
    got = judged(tmp_path, "vllm", {"capture_boundaries": (1, 3, 6)}, edit=without_nested_ids, engines=["sglang"])
    assert got == [
        ('E-ENGINE-WRONG', 'error', 'SGLang: captures its default layers {2, L//2, L-3}, never the trained [1, 3, 6]; '
         'it would serve this file wrong', TO_SGLANG, None, 'sglang'),
        ('W-CAPTURE-IDS-IGNORED', 'warning', 'SGLang reads capture ids only from eagle_config.eagle_aux_hidden_state_'
         'layer_ids: it ignores eagle_aux_hidden_state_layer_ids [1, 3, 6] and captures its default boundaries '
         '{2, L//2, L-3}', 'write the ids where SGLang reads them: `eagle3-convert --to sglang {tmp}/drafter '
         'drafter-sglang` writes them there', '$.eagle_aux_hidden_state_layer_ids', 'sglang'),
        ('I-ENGINE-RELEASES', 'info', 'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (captures its '
         'default layers {2, L//2, L-3}, never the trained [1, 3, 6]); served WRONG on 0.5.9–0.5.11 (SGLang drops '
         'layers.0.* weights (it loads midlayer.* only) (layers.0.hidden_norm.weight, layers.0.input_layernorm.weight,'
         ' layers.0.mlp.down_proj.weight (+7 more)) without a word)', None, None, 'sglang')]
    result = run_cli("validate", "--engine", "sglang", tmp_path / "drafter")
    assert result.exit_code == 1 and "FAIL" in result.stdout, result.stdout


def test_sglang_capturing_its_defaults_where_they_may_be_the_trained_layers_is_a_warning(tmp_path: Path):
    """The same file trained on [2, 4, 5], SGLang's defaults on an 8-layer target: only --target can tell."""
    got = judged(tmp_path, "vllm", edit=without_nested_ids, engines=["sglang"], codes=("ENGINE", "CAPTURE"))
    assert [f[:2] for f in got] == [('W-CAPTURE-IDS-IGNORED', 'warning'), ('I-ENGINE-RELEASES', 'info')]
    assert run_cli("validate", "--engine", "sglang", tmp_path / "drafter").exit_code == 0


def local_verifier(config: dict[str, Any]) -> None:
    config["speculators_config"]["verifier"]["name_or_path"] = "./target"


def test_a_local_verifier_is_a_way_of_serving_not_a_refusal(tmp_path: Path):
    """vLLM's `vllm serve DRAFTER` shortcut refuses a speculators config whose verifier is a local path (Speculators
    verifier must name a remote model repository); `vllm serve TARGET --speculative-config` serves the file. It was
    an error (E-ENGINE-REFUSES), a false alarm: now a caveat naming the command that serves it, said once for the
    two runners (issue 34)."""
    got = judged(tmp_path, "speculators", edit=local_verifier)
    assert got == [
        ('W-ENGINE-CAVEAT', 'warning', "only as `vllm serve TARGET --speculative-config '{\"model\": \"DRAFTER\", "
         "\"method\": \"eagle3\"}'`: the `vllm serve DRAFTER` shortcut takes its target from the verifier name "
         "'./target', a local path where it runs (0.33.0 refuses it: Speculators verifier must name a remote model "
         "repository; 0.24.0 loads that path)", CAVEAT_HINT, None, 'vllm')]


def test_a_deepseek_mtp_model_type_vllm_refuses_is_said_with_the_conversion_that_fixes_it(tmp_path: Path):
    """An MLA drafter whose config says model_type deepseek_v3: vLLM's SpeculativeConfig turns it into DeepSeek MTP,
    which it then refuses; validate used to say nothing of it."""
    got = judged(tmp_path, "vllm", {"family": "deepseek_mla"}, edit=lambda c: c.update(model_type="deepseek_v3"))
    assert got == [
        ('E-ENGINE-REFUSES', 'error', "vLLM (V1 runner): vLLM takes a deepseek_v3 draft config for DeepSeek MTP: model "
         "architectures ['Eagle3DeepSeekMTPModel'] are not supported", TO_VLLM, None, 'vllm')]


def deepseek_sglang_file(boundaries: tuple[int, ...]) -> dict[str, Any]:
    """judged()'s arguments: an SGLang file for an 8-layer DeepSeek target (its ids nested only), judged for vLLM
    0.21.0 and 0.22.0 with the target given. vLLM's V1 runner reads the nested list from 0.22.0 on (PR 42764), as
    boundaries; its V2 runner never does, and captures its defaults [2, 4, 5]."""
    return dict(layout="sglang", spec={"capture_boundaries": boundaries, "target_model_type": "deepseek_v3"},
                engines=["vllm"], releases={"vllm": ["0.21.0", "0.22.0"]}, target={}, codes=("ENGINE-WRONG",))


def test_a_release_both_runners_serve_wrong_is_said_once_and_the_next_one_still_judged(tmp_path: Path):
    """Trained on [1, 3, 5] (ids [0, 2, 4]): on 0.21.0 both runners capture their defaults (said once, by the V1
    runner's line); on 0.22.0 the V1 runner reads the nested list right and the V2 runner still captures its
    defaults: its line is said, after the release skipped for it."""
    assert judged(tmp_path, **deepseek_sglang_file((1, 3, 5))) == [
        ('E-ENGINE-WRONG', 'error', 'vLLM (V1 runner) 0.21.0: captures its default layers [2, 4, 5], trained on '
         '[0, 2, 4]; it would serve this file wrong', 'upgrade to vLLM ≥ 0.22.0, which serves this file as trained; '
         'or ' + to_vllm_target("0.21.0"), None, 'vllm'),
        ('E-ENGINE-WRONG', 'error', 'vLLM (V2 runner) 0.22.0: captures its default layers [2, 4, 5], trained on '
         '[0, 2, 4]; it would serve this file wrong', to_vllm_target("0.22.0"), None, 'vllm')]


def test_each_release_both_runners_serve_wrong_is_said_once(tmp_path: Path):
    """Trained on [2, 4, 6] (ids [1, 3, 5]): both runners serve it wrong on both releases (the V1 runner from 0.22.0
    reads [1, 3, 5] as boundaries): one line a release, the V1 runner's."""
    assert judged(tmp_path, **deepseek_sglang_file((2, 4, 6))) == [
        ('E-ENGINE-WRONG', 'error', 'vLLM (V1 runner) 0.21.0: captures its default layers [2, 4, 5], trained on '
         '[2, 4, 6]; it would serve this file wrong', to_vllm_target("0.21.0"), None, 'vllm'),
        ('E-ENGINE-WRONG', 'error', 'vLLM (V1 runner) 0.22.0: captures layers [1, 3, 5], trained on [2, 4, 6]; it '
         'would serve this file wrong', to_vllm_target("0.22.0"), None, 'vllm')]


def test_the_releases_line_is_said_once_per_engine_though_its_runners_disagree_otherwise(tmp_path: Path):
    """An SGLang file with fc_norm: vLLM before 0.22.0 fails to load fc_norm.*; from 0.22.0 the V1 runner reads the
    nested ids [1, 3, 4] as boundaries (wrong) and the V2 runner captures its defaults (the trained [2, 4, 5] on an
    8-layer target). Each runner's releases disagree, each otherwise: one line for vLLM (its first runner's), and
    SGLang's own line beside it (SGLang before 0.5.12 ignores fc_norm)."""
    got = judged(tmp_path, "sglang", {"fc_norm": True}, engines=["sglang", "vllm"], codes=("I-ENGINE",))
    assert got == [
        ('I-ENGINE-RELEASES', 'info', 'SGLang releases disagree on this file: served as trained on ≥ 0.5.12; served '
         'WRONG on 0.5.9–0.5.11 (fc_norm True in training, False in SGLang)', None, None, 'sglang'),
        ('I-ENGINE-RELEASES', 'info', 'vLLM releases disagree on this file: served WRONG on ≥ 0.22.0 (captures layers '
         '[1, 3, 4], trained on [2, 4, 5]); refused loudly on 0.18.0–0.21.0 (vLLM builds no fc_norm and fails to '
         'load fc_norm.* (KeyError))', None, None, 'vllm')]
    # the V2 runner's own reading, which that line leaves out: the same file with its ids where both runners read them
    spec = DrafterSpec(fc_norm=True)
    root = tmp_path / "vllm-ids"
    root.mkdir()
    config = config_for("sglang", spec)
    config["eagle_aux_hidden_state_layer_ids"] = [2, 4, 5]
    (root / "config.json").write_text(json.dumps(config))
    write_safetensors(root / "model.safetensors", stored_tensors("sglang", spec))
    lines = [f["message"] for f in json.loads(run_cli("validate", "--json", "--engine", "vllm", root).stdout)[
        "findings"] if f["code"] == "I-ENGINE-RELEASES"]
    assert lines == ['vLLM releases disagree on this file: served as trained on ≥ 0.22.0; refused loudly on '
                     '0.18.0–0.21.0 (vLLM builds no fc_norm and fails to load fc_norm.* (KeyError))'], lines


LMDEPLOY_WRONG = "norm_output True in training, False in LMDeploy; it would serve this file wrong"
# two steps, the second no command makes: the conversion is named, not quoted as a way out on its own
TO_LMDEPLOY = ('write the eagle layout (eagle3-convert --to eagle {tmp}/drafter drafter-eagle), then set architectures '
               'to ["LlamaForCausalLM"], the name LMDeploy\'s docs load')


def test_an_older_release_said_first_does_not_silence_the_newest(tmp_path: Path):
    """LMDeploy (judged by its module alone) ignores norm_output in every release: a fleet of 0.11.0 and the newest
    gets both lines in either order. Named older release first, the newest one's line used to be dropped (its fault
    counted as said by the older release's)."""
    for n, fleet in enumerate((["0.11.0", None], [None, "0.11.0"])):
        (tmp_path / str(n)).mkdir()
        got = judged(tmp_path / str(n), "sglang", {"norm_output": True},
                     edit=lambda c: c.update(architectures=["LlamaForCausalLM"]), engines=["lmdeploy"],
                     releases={"lmdeploy": fleet}, codes=("ENGINE",))
        lines = [('E-ENGINE-WRONG', 'error', f'LMDeploy (from source){" " + r if r else ""}: {LMDEPLOY_WRONG}',
                  TO_LMDEPLOY, None, 'lmdeploy') for r in fleet]
        assert got == lines, fleet


# ------------------------------------------------------------------ convert: the layout its own engines refuse
# (converters/eagle.py and speculators.py: the WritePlan's layout name is read only there)

def test_an_eagle_output_sglang_would_serve_wrong_is_refused_naming_the_eagle_layout(tmp_path: Path):
    """fc fuses 3 states of width Ht = 16 into H = 48: SGLang applies fc only when the incoming width differs from H,
    so it would skip the trained fc. EAGLE's writer holds such a drafter (one layer, no flags, the default layers on
    the 8-layer target), so the refusal is its engines' verdict, naming the layout."""
    spec = DrafterSpec(hidden_size=48, head_dim=12, target_hidden_size=16)
    result = run_cli("--to", "eagle", "--no-record", "--target", write_target(tmp_path / "target", spec),
                     build_drafter(tmp_path / "src", "vllm", spec), tmp_path / "out")
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the eagle layout is for SGLang, vLLM (V1 runner), vLLM (V2 runner), and SGLang would serve this file "
        "wrong: SGLang skips fc: k*Ht == H (3*16) [E-ENGINE-WRONG] — hint: convert to a layout whose engine serves "
        "the drafter as trained (`--to vllm` serves every variant)")


def test_a_speculators_output_an_older_vllm_would_serve_wrong_is_refused_naming_the_speculators_layout(tmp_path: Path):
    """vLLM's speculators path passes norm_before_fc on from 0.19.0 (PR 38111): for a fleet on 0.18.0 the file
    would be served without its input norm."""
    result = run_cli("--to", "speculators", "--no-record", "--verifier", "org/target-model", "--engine",
                     "vllm==0.18.0", build_drafter(tmp_path / "src", "vllm", DrafterSpec(norm_before_fc=True)),
                     tmp_path / "out")
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the speculators layout is for speculators library, vLLM (V1 runner), vLLM (V2 runner), and vLLM (V1 "
        "runner) would serve this file wrong: norm_before_fc True in training, False in vLLM (V1 runner) "
        "[E-ENGINE-WRONG] — hint: upgrade to vLLM ≥ 0.19.0, which serves this file as trained; or convert to a layout "
        "whose engine serves the drafter as trained (`--to vllm` serves every variant)")


def test_the_releases_that_serve_an_older_release_s_fault_are_named_upgrade_or_downgrade(tmp_path: Path):
    """An SGLang file's nested ids [1, 3, 4] (boundaries [2, 4, 5]): vLLM's V1 runner reads them as boundaries
    [1, 3, 4] from 0.22.0 on (wrong) and captures its defaults, the trained layers, before. Judged on 0.22.0, the
    releases that serve it are older: the hint used to say "upgrade to vLLM 0.18.0–0.21.0"."""
    got = judged(tmp_path, "sglang", engines=["vllm"], releases={"vllm": ["0.22.0"]}, target={},
                 codes=("ENGINE-WRONG",))
    assert got == [
        ('E-ENGINE-WRONG', 'error', 'vLLM (V1 runner) 0.22.0: captures layers [1, 3, 4], trained on [2, 4, 5]; it '
         'would serve this file wrong', 'downgrade to vLLM 0.18.0–0.21.0, which serves this file as trained; or '
         + to_vllm_target("0.22.0"), None, 'vllm')]
