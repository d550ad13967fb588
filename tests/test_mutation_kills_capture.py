"""validate's capture findings (eagle3_convert/validate/capture.py) word for word: every finding the capture cases
of tests/test_validate.py give (code, severity, message, hint, where), not only the code they are there to raise
(issue 26: mutation survivors). Messages that name the checkpoint's path say {tmp} for the test's directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter
from test_validate import CASES, _ids, edit_config

from eagle3_convert.validate import check_capture_record, validate_checkpoint

EXPECTED: dict[str, list[tuple[str, str, str, str | None, str | None]]] = {
    'E-CAPTURE-COUNT': [
        ('E-CAPTURE-COUNT', 'error',
         'eagle_aux_hidden_state_layer_ids lists 2 capture ids [2, 4] but fc.weight fuses 3 states',
         'the capture id list and the fc width must agree',
         '$.eagle_aux_hidden_state_layer_ids'),
    ],
    'E-CAPTURE-EMBEDDING': [
        ('E-CAPTURE-EMBEDDING', 'error',
         'the drafter was trained with the embedding output (boundary 0) among its taps [0, 4, 5], but '
         'SGLang reads eagle_config.eagle_aux_hidden_state_layer_ids [0, 4, 5] as boundaries [1, 5, 6]: '
         'the embedding tap is replaced by a block output',
         '`eagle3-convert --to sglang {tmp}/drafter drafter-sglang` writes ids SGLang reads as [0, 4, 5] '
         '(SGLang captures the embedding with id -1)',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
        # the files are written with layers.0.* names, which SGLang reads only from 0.5.12 (engines/releases.py)
        ('I-ENGINE-RELEASES', 'info',
         'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (captures layers [1, 5, 6], trained on [0, 4, 5]); '
         'served WRONG on 0.5.9–0.5.11 (SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) '
         'without a word)',
         None,
         None),
    ],
    'E-CAPTURE-FC-BYPASSED': [
        ('E-CAPTURE-FC-BYPASSED', 'error',
         "eagle_config.use_aux_hidden_state is false: SGLang passes the target's last hidden state alone "
         'and never applies fc.weight [32, 96]',
         'set eagle_config.use_aux_hidden_state to true (an EAGLE-3 drafter fuses captured states)',
         '$.eagle_config.use_aux_hidden_state'),
    ],
    'E-CAPTURE-FIELD': [
        ('E-CAPTURE-FIELD', 'error',
         "eagle_aux_hidden_state_layer_ids is '2,4,5': not a short list of integers",
         'write the capture ids as a list of integers',
         '$.eagle_aux_hidden_state_layer_ids'),
        ('I-CAPTURE-DEFAULT', 'info',
         'config.json names no capture ids: the speculators library captures its default boundaries {2, '
         'L//2, L-3}',
         None,
         None),
        ('I-CAPTURE-DEFAULT', 'info',
         'config.json names no capture ids: vLLM captures its default boundaries {2, L//2, L-3}',
         None,
         None),
    ],
    'E-CAPTURE-MISMATCH': [
        ('E-CAPTURE-MISMATCH', 'error',
         'SGLang reads eagle_config.eagle_aux_hidden_state_layer_ids [2, 4, 5] as boundaries [3, 5, 6], '
         'but the drafter was trained on boundaries [2, 4, 5]',
         '`eagle3-convert --to sglang {tmp}/drafter drafter-sglang` writes ids SGLang reads as [2, 4, 5]',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
        # the files are written with layers.0.* names, which SGLang reads only from 0.5.12 (engines/releases.py)
        ('I-ENGINE-RELEASES', 'info',
         'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (captures layers [3, 5, 6], trained on [2, 4, 5]); '
         'served WRONG on 0.5.9–0.5.11 (SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) '
         'without a word)',
         None,
         None),
    ],
    'E-CAPTURE-RANGE': [
        ('E-CAPTURE-RANGE', 'error',
         'capture boundaries [2, 4, 9] include [9], outside [0, 8] of the 8-layer target',
         "check --target is the model the drafter was trained for, and the ids' convention",
         '$.eagle_aux_hidden_state_layer_ids'),
    ],
    'E-CAPTURE-RECORD': [
        ('E-CAPTURE-RECORD', 'error',
         'the config captures boundaries [2, 4, 6], eagle3-convert.json (written with another config.json) says '
         'the drafter was trained on [2, 4, 5]',
         "`eagle3-convert --capture-layers 2,4,5 --convention boundary --to sglang {tmp}/drafter drafter-sglang` "
         "writes the recorded layers",
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
    ],
    'E-CAPTURE-UNEXPRESSIBLE': [
        ('E-CAPTURE-UNEXPRESSIBLE', 'error',
         'no id list makes sglang (deepseek target family) capture boundaries [1, 3, 5]',
         "this engine's id convention cannot express these capture layers; serve with vLLM instead",
         '$.eagle_aux_hidden_state_layer_ids'),
        # the files are written with layers.0.* names, which SGLang reads only from 0.5.12 (engines/releases.py)
        ('I-ENGINE-RELEASES', 'info',
         'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (captures layers [2, 4, 6], trained on [1, 3, 5]); '
         'served WRONG on 0.5.9–0.5.11 (SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) '
         'without a word)',
         None,
         None),
    ],
    'E-CAPTURE-UNREACHABLE': [
        ('E-CAPTURE-UNREACHABLE', 'error',
         'sglang cannot capture boundary 8 (the output of block 7) on an 8-layer target: the capture would '
         'silently go missing',
         'retrain the drafter on capturable layers, or serve it with vLLM (speculators/vllm layouts)',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
    ],
    'E-ENGINE-WRONG': [
        ('E-ENGINE-WRONG', 'error',
         'llama.cpp: captures its default layers {2, L//2, L-3}, never the trained [1, 4, 5]; it would '
         'serve this file wrong',
         'write the file the engine reads right: `eagle3-convert --engine llamacpp --to vllm {tmp}/drafter '
         'drafter-vllm` (or the GGUF itself: eagle3-convert --to gguf --target-gguf TARGET.gguf)',
         None),
    ],
    'I-CAPTURE-DEFAULT': [
        ('I-CAPTURE-DEFAULT', 'info',
         'config.json names no capture ids: the speculators library captures its default boundaries {2, '
         'L//2, L-3}',
         None,
         None),
        ('I-CAPTURE-DEFAULT', 'info',
         'config.json names no capture ids: vLLM captures its default boundaries {2, L//2, L-3}',
         None,
         None),
    ],
    'I-CAPTURE-RUNTIME': [
        ('I-CAPTURE-RUNTIME', 'info',
         'TensorRT-LLM takes the capture layers from its runtime argument, not config.json: pass ids [1, '
         '3, 4] (block outputs) to capture boundaries [2, 4, 5]',
         None,
         None),
    ],
    'W-CAPTURE-CONVENTION': [
        ('W-CAPTURE-CONVENTION', 'warning',
         'eagle_config.eagle_aux_hidden_state_layer_ids [3, 5, 6] is read by SGLang as boundaries [4, 6, '
         "7], while in the vllm layout's convention it means boundaries [3, 5, 6]",
         'no conversion fixes this: writing the vllm layout is refused (--from sglang cannot read it: the '
         'checkpoint is in the vllm layout (top-level norm_before_residual (a vLLM key SGLang has not)); '
         'the sglang reader refuses it (E-CAPTURE-CONFLICT): the top-level eagle_aux_hidden_state_layer_ids '
         '[2, 4, 5] (vLLM reads them as boundaries [2, 4, 5]) and eagle_config.eagle_aux_hidden_state_layer_ids '
         '(read by SGLang as boundaries [4, 6, 7]) name different layers [E-FROM-MISMATCH])',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
    ],
    'W-CAPTURE-IDS-IGNORED': [
        ('W-CAPTURE-IDS-IGNORED', 'warning',
         'SGLang reads capture ids only from eagle_config.eagle_aux_hidden_state_layer_ids: it ignores '
         'eagle_aux_hidden_state_layer_ids [2, 4, 5] and captures its default boundaries {2, L//2, L-3}',
         'write the ids where SGLang reads them: `eagle3-convert --to sglang {tmp}/drafter drafter-sglang` '
         'writes them there',
         '$.eagle_aux_hidden_state_layer_ids'),
        # the files are written with layers.0.* names, which SGLang reads only from 0.5.12 (engines/releases.py)
        ('I-ENGINE-RELEASES', 'info',
         'SGLang releases disagree on this file: served as trained (its default layers) on ≥ 0.5.12; '
         'served WRONG on 0.5.9–0.5.11 (SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) '
         'without a word)',
         None,
         None),
    ],
}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_each_capture_case_gives_exactly_these_findings(code: str, tmp_path: Path):
    case = CASES[code]
    path = case.base(tmp_path)
    case.change(path)
    options = case.changed_options(tmp_path) if case.changed_options else case.options(tmp_path)
    report = validate_checkpoint(path, **options)
    got = [(f.code, f.severity, f.message, f.hint, f.where) for f in report.findings]
    assert got == [tuple(v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for v in row)
                   for row in EXPECTED[code]]


# Two lists out of their layout's place: a top-level list in an SGLang file (vLLM reads it), a nested list alone in
# a vLLM file (only SGLang and vLLM's V1 runner read it).
MISPLACED: dict[str, tuple[str, dict, list[tuple[str, str, str, str | None, str | None]]]] = {
    "a top-level list in an SGLang file": ("sglang", {"top": [3, 5, 6]}, [
        ('E-CAPTURE-CONFLICT', 'error',
         'the top-level eagle_aux_hidden_state_layer_ids [3, 5, 6] (vLLM reads them as boundaries [3, 5, 6]) and '
         'eagle_config.eagle_aux_hidden_state_layer_ids (read by SGLang as boundaries [2, 4, 5]) name different '
         'layers',
         'say which the drafter was trained on: `eagle3-convert --capture-layers 2,4,5 --convention boundary --to '
         'sglang {tmp}/drafter drafter-sglang` (the SGLang reading) or `eagle3-convert --capture-layers 3,5,6 '
         '--convention boundary --to sglang {tmp}/drafter drafter-sglang` (the vLLM reading); a file written for '
         'vLLM (boundaries in both places) reads right with --from vllm',
         None),
        ('W-CAPTURE-CONVENTION', 'warning',
         "eagle_aux_hidden_state_layer_ids [3, 5, 6] is read by vLLM as boundaries [3, 5, 6], while in the sglang "
         "layout's convention it means boundaries [4, 6, 7]",
         'keep one list where the serving engine reads it: move it to eagle_config.eagle_aux_hidden_state_layer_ids '
         'if it is in the sglang convention, or, if the ids are boundaries, convert with `eagle3-convert --from vllm '
         '--to sglang {tmp}/drafter drafter-sglang`',
         '$.eagle_aux_hidden_state_layer_ids')]),
    "a nested list alone in a vLLM file": ("vllm", {"top": None, "nested": [1, 3, 6]}, [
        ('W-CAPTURE-CONVENTION', 'warning',
         "eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] is read by SGLang as boundaries [2, 4, 7], while "
         "in the vllm layout's convention it means boundaries [1, 3, 6]",
         "no conversion fixes this: writing the vllm layout is refused (--from sglang leaves norm_before_residual "
         "unread, which the vllm layout's engines read: the checkpoint is in the vllm layout (top-level "
         "norm_before_residual (a vLLM key SGLang has not)) [E-FROM-MISMATCH])",
         '$.eagle_config.eagle_aux_hidden_state_layer_ids'),
        ('W-CAPTURE-IDS-IGNORED', 'warning',
         'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it ignores '
         'eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] and captures its default boundaries {2, L//2, '
         'L-3} (its V1 runner instead falls back to that list, read as boundaries [1, 3, 6])',
         "no conversion fixes this: writing the vllm layout is refused (capture ids are only in eagle_config: "
         "vLLM's V1 runner reads them as boundaries while its V2 runner ignores them and captures its defaults "
         "[E-CAPTURE-AMBIGUOUS])",
         '$.eagle_config.eagle_aux_hidden_state_layer_ids')]),
}


@pytest.mark.parametrize("name", sorted(MISPLACED))
def test_a_list_out_of_its_layouts_place(name: str, tmp_path: Path):
    layout, ids, expected = MISPLACED[name]
    path = build_drafter(tmp_path / "drafter", layout, DrafterSpec())
    _ids(**ids)(path)
    got = [(f.code, f.severity, f.message, f.hint, f.where) for f in validate_checkpoint(path).findings]
    assert got == [tuple(v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for v in row)
                   for row in expected]


def test_a_record_with_the_embedding_tap_the_config_lost():
    [found] = check_capture_record([2, 4, 5], [0, 4, 5], "the record", where="$.x")
    assert (found.code, found.message, found.hint, found.where) == (
        "E-CAPTURE-EMBEDDING", "the record says the drafter was trained with the embedding output (boundary 0) among "
        "its taps [0, 4, 5], but config.json captures boundaries [2, 4, 5]", "rewrite the ids from the record: "
        "block-output engines (SGLang) capture the embedding with id -1", "$.x")
    assert check_capture_record([5, 4, 0], [0, 4, 5], "the record") == []


def test_a_nested_list_alone_read_as_vllm_without_its_markers(tmp_path: Path):
    """A vLLM file without norm_before_residual and without its top-level list, read with --from vllm: the
    nested list's warning offers `--from sglang` (the ids may be block outputs), and vLLM's V1 reading of it is
    what --capture-layers would have to say; that conversion reads the file --from vllm too, as validate did, which
    convert refuses (the file is SGLang's), so the hint says why."""
    path = build_drafter(tmp_path / "drafter", "vllm", DrafterSpec())
    _ids(top=None, nested=[1, 3, 6])(path)
    edit_config(lambda c: c.pop("norm_before_residual"))(path)
    got = [(f.code, f.message, f.hint) for f in validate_checkpoint(path, from_layout="vllm").findings]
    assert got[1:] == [
        ("W-CAPTURE-CONVENTION",
         "eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] is read by SGLang as boundaries [2, 4, 7], while "
         "in the vllm layout's convention it means boundaries [1, 3, 6]",
         "keep one list where the serving engine reads it: move it to eagle_aux_hidden_state_layer_ids if it is in "
         "the vllm convention, or, if the ids are block outputs, convert with `eagle3-convert --from sglang --to vllm "
         f"{path} drafter-vllm`"),
        ("W-CAPTURE-IDS-IGNORED",
         "vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it ignores "
         "eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] and captures its default boundaries {2, L//2, "
         "L-3} (its V1 runner instead falls back to that list, read as boundaries [1, 3, 6])",
         "no conversion fixes this: writing the vllm layout is refused (--from vllm cannot read it: the checkpoint "
         "is in the sglang layout (LlamaForCausalLMEagle3 config with eagle_config and no top-level ids); the vllm "
         "reader refuses it (E-CAPTURE-AMBIGUOUS): capture ids are only in eagle_config: vLLM's V1 runner reads them "
         "as boundaries while its V2 runner ignores them and captures its defaults [E-FROM-MISMATCH])")]
    assert got[0][0] == "E-FROM-MISMATCH"


def test_a_nested_list_holding_minus_one_alone_in_a_vllm_file_names_no_boundaries_none(tmp_path: Path):
    """vLLM's V1 runner falls back to a nested list; one holding SGLang's -1 (the embedding tap) reads as no
    boundaries at all: the warning says so, instead of 'read as boundaries None'."""
    path = build_drafter(tmp_path / "drafter", "vllm", DrafterSpec(), capture_boundaries=None)
    _ids(top=None, nested=[-1, 3, 4])(path)
    report = validate_checkpoint(path, engines=("vllm",))
    [ignored] = [f for f in report.findings if f.code == "W-CAPTURE-IDS-IGNORED"]
    assert "None" not in ignored.message
    assert ignored.message.endswith("(its V1 runner instead falls back to that list, which names no boundaries it "
                                    "reads: what it captures then is not established)")
