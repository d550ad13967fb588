"""Every hint is a way out: each `eagle3-convert ...` command a hint names, over the validate corpus (one
broken thing per case), the hazard samples and the hostile corpus, is run for real and succeeds; a hint
with no such command is a plain statement. Convert's own refusals are held to the same rule for the
`--to LAYOUT` they suggest. Each conversion a validate hint names is validated again with the same options: the
finding it was for is gone (tests/test_hints_rerun.py holds the samples, the real configs and the engine releases to
the same rule)."""

from __future__ import annotations

import re
import json
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import DATA, EXAMPLE, run_cli
from hostile import hostile_cases
from test_validate import CASES

from eagle3_convert.validate import validate_checkpoint
from eagle3_convert.errors import Eagle3Error

ALL_ENGINES = ["speculators", "vllm", "sglang", "trtllm", "llamacpp"]
COMMAND = re.compile(r"`(eagle3-convert [^`]*)`")
TO_FRAGMENT = re.compile(r"`(--to [a-z]+)`")


# What each case's hints tell the user to run, without the paths (SRC as validate was given it, DST): every one
# is run and must succeed, and the list is asserted, so a hint that stops naming its command (or a test that stops
# running it) fails. A case not listed names no command: its hints are statements (E-CAPTURE-RANGE: a conversion
# read with the --target given refuses boundaries past its depth, so its hints say so). A case validated with
# --target names it in each conversion (TARGET), so that the conversion reads the file as validate did.
VALIDATE_HINT_COMMANDS = {
    "I-KIND-BLOCK-DIFFUSION": ("--to dflash",),  # SGLang reads no speculators DFlash config: the flat one it does
    "I-ENGINE-RELEASES": ("--engine vllm --to vllm", "--to vllm"),
    "I-ENGINE-READING": ("--to modelopt", "--to sglang"),
    "W-ENGINE-RELEASE-UNKNOWN": ("--to vllm",),
    "E-CAPTURE-EMBEDDING": ("--to sglang",),
    "E-CAPTURE-FC-BYPASSED": ("--to vllm",),
    "E-CAPTURE-MISMATCH": ("--to sglang",),
    # the recorded layers, and only they: stating the config's against the record is refused (issue 33)
    "E-CAPTURE-RECORD": ("--capture-layers 2,4,5 --convention boundary --to sglang",),
    "E-CAPTURE-UNREACHABLE": ("--target TARGET --engine llamacpp --to vllm", "--target TARGET --to vllm"),
    "W-TARGET-UNTOLD": ("--to modelopt", "--to sglang", "registry add --verifier org/other-model"),
    "E-CONFIG-TARGET-HIDDEN-NULL": ("--engine trtllm --to modelopt", "--to vllm"),  # TensorRT-LLM refuses a null width too
    "E-DEEP-NONFINITE": ("--to vllm",),
    "E-DEEP-ZERO": ("--to vllm",),
    "E-DTYPE": ("--to modelopt", "--to sglang"),
    "E-ENGINE-UNSUPPORTED": ("--engine vllm --to vllm",),  # another engine: named, so that it is judged
    "E-ENGINE-WRONG": ("--engine llamacpp --to vllm", "--to vllm"),
    "E-KEY-UNAPPLIED": ("--engine vllm --to vllm", "--to vllm"),
    "E-KEY-UNKNOWN": ("inspect",),
    # the engines that apply the untrained twin (SGLang, TensorRT-LLM) and llama.cpp's multi-layer refusal
    "W-KEY-UNTRAINED-TWIN": ("--engine vllm --to vllm", "--to modelopt", "--to sglang"),
    "E-SCHEMA": ("--to modelopt", "--to sglang"),
    "E-TARGET-HIDDEN": ("--target TARGET --to modelopt", "--target TARGET --to sglang"),
    "E-TARGET-VOCAB": ("--target TARGET --to modelopt", "--target TARGET --to sglang"),
    "E-VOCAB-ABSOLUTE": ("--repair-d2t-absolute --to modelopt",),
    "E-VOCAB-NO-D2T": ("--to modelopt", "--to sglang", "--to vllm"),
    "W-VOCAB-DEFAULT": ("--to modelopt", "--to sglang"),  # the base's E-CONFIG-ARCH; its own hint is a statement
    "E-VOCAB-NO-T2D": ("--to modelopt", "--to sglang", "--to speculators"),
    "I-CAPTURE-DEFAULT": ("--to modelopt", "--to sglang"),
    "I-CAPTURE-RUNTIME": ("--to vllm",),
    "I-ROPE-EXPORT-YARN": ("--to vllm",),
    "W-CAPTURE-CONVENTION": ("--to sglang",),
    "W-CAPTURE-IDS-IGNORED": ("--to sglang",),
    "W-CONFIG-CONTEXT": ("--target TARGET --to modelopt", "--target TARGET --to sglang"),
    "W-CONFIG-KEY-FOREIGN": ("--to modelopt", "--to sglang"),
    "W-CONFIG-KEY-UNKNOWN": ("--to vllm",),
    "W-DEEP-INIT-NORMS": ("--to vllm",),
    "W-ENGINE-CAVEAT": ("--engine vllm --to vllm",),
    "W-TARGET-FAMILY": ("--target TARGET --to modelopt", "--target TARGET --to sglang"),
    # issue 35: the embedding left out (a copy, or a stray table of a drafter trained on the target's), the rope stated
    "I-EMBED-TARGET-COPY": ("--target TARGET --drop-embed identical --to sglang", "--target TARGET --to vllm"),
    "W-EMBED-NOT-TARGET": ("--target TARGET --drop-embed frozen --to sglang", "--target TARGET --to vllm"),
    "W-ROPE-SPELLINGS": ("--rope-theta 10000 --to sglang", "--to vllm"),
    "W-ROPE-TARGET": ("--target TARGET --rope-theta target --to sglang", "--target TARGET --to vllm"),
}
HAZARD_HINT_COMMANDS = {
    "h2-d2t-absolute": ("--repair-d2t-absolute --to sglang",),
    "h4-missing-lm_head": (),
    "h6-truncated": (),
    "h8-sglang-ids-toplevel-only": ("--from sglang --capture-layers 1,3,4 --convention sglang --to sglang",
                                    "--from sglang --capture-layers 1,3,4 --convention sglang --to vllm",
                                    "--from vllm --engine sglang --to sglang", "--from vllm --to sglang"),
    "specforge-sglang": ("--to vllm",),
    "speculators-trained": ("--engine vllm --to vllm",),
    "speculators-fullvocab-qwen3": ("--engine vllm --to vllm",),
}
HOSTILE_HINT_COMMANDS = {"tensor-unknown": ("inspect",)}
HOSTILE_REFUSED = {"src-is-file": "E-SRC-MISSING", "src-missing": "E-SRC-MISSING"}  # no findings: one error


def hint_commands(hints: list[str]) -> list[str]:
    return sorted({cmd for hint in hints if hint for cmd in COMMAND.findall(hint)})


def without_paths(command: str, label: str) -> str:
    words = shlex.split(command)[1:]
    if "--to" in words:
        words = words[:-1]  # DST
    return " ".join(w for w in words if w != label)


def run_hint(command: str, src: Path, label: str, out: Path) -> tuple[int, str]:
    """Run a hint's command as a user would paste it: SRC as the label validate was given, DST fresh."""
    words = shlex.split(command)[1:]
    words = [str(src) if w == label else w for w in words]
    if "--to" in words:  # its DST: the last word; put it where the test can write
        words[-1] = str(out / Path(words[-1]).name)
    result = run_cli(*words, *(["--no-record"] if "--to" in words else []))
    if words[0] == "inspect":  # a hint to look: it must show what is stored, even when findings exit 1
        return (0 if "tensors" in result.stdout and result.exit_code in (0, 1) else 1), result.stdout + result.stderr
    return result.exit_code, result.stderr


def still_found(finding, command: str, out: Path, options: dict, src: Path) -> list[str]:
    """What the file `command` wrote (under `out`) still shows of `finding`, validated with the same options (for the
    engine and release the command names, when it names one: a command leading to another engine is checked for
    that engine's errors). A `registry add` writes no file: SRC is validated again, against the registry it wrote."""
    words = shlex.split(command)[1:]
    if words[0] == "inspect":
        return []
    if words[0] == "registry":
        target = options.get("target")
        again = json.loads(run_cli("validate", "--json", src, *(["--target", target.name_or_path] if target else []))
                           .stdout)
        return [f["code"] for f in again["findings"] if (f["code"], f["engine"]) == (finding.code, finding.engine)]
    named = [e for flag, e in zip(words, words[1:]) if flag == "--engine"]
    engines = sorted({e.split("==")[0] for e in named}) or ALL_ENGINES
    releases = {e.split("==")[0]: [e.split("==")[1]] for e in named if "==" in e}
    report = validate_checkpoint(out / Path(words[-1]).name, engines=engines, releases=releases,
                                 **{k: v for k, v in options.items() if k not in ("from_layout", "engines", "releases")})
    if any(e.split("==")[0] != finding.engine for e in named):
        return [f.code for f in report.findings if f.severity == "error" and f.engine in engines]
    return [f.code for f in report.findings if (f.code, f.engine) == (finding.code, finding.engine)]


def run_hints(hints: list[str], path: Path, tmp_path: Path) -> tuple[str, ...]:
    """Run every command `hints` name on `path`; each must succeed. The commands run, without their paths."""
    commands = hint_commands(hints)
    for i, command in enumerate(commands):
        code, err = run_hint(command, path, str(path), tmp_path / f"hint{i}")
        assert code == 0, f"the hint command `{command}` fails: {err}"
    return tuple(without_paths(c, str(path)) for c in commands)


def check_hints(path: Path, tmp_path: Path, **options) -> tuple[str, ...]:
    """The commands run, the --target given (a path in tmp_path: its conversions read the file with it) as TARGET.
    Each conversion's output is validated again with the same options: the finding its hint was for is gone."""
    report = validate_checkpoint(path, engines=ALL_ENGINES, source_label=str(path), **options)
    commands = run_hints([f.hint for f in report.findings], path, tmp_path)
    ran = hint_commands([f.hint for f in report.findings])
    for f in report.findings:
        for command in hint_commands([f.hint]):
            assert not still_found(f, command, tmp_path / f"hint{ran.index(command)}", options, path), (f.code,
                                                                                                        command)
    target = options.get("target")
    return tuple(c.replace(f"--target {target.name_or_path} ", "--target TARGET ") for c in commands) if target \
        else commands


@pytest.mark.parametrize("code", sorted(CASES))
def test_every_validate_hint_command_succeeds(code: str, tmp_path: Path):
    case = CASES[code]
    path = case.base(tmp_path)
    case.change(path)
    options = case.changed_options(tmp_path) if case.changed_options else case.options(tmp_path)
    options.pop("engines", None)
    assert check_hints(path, tmp_path, **options) == VALIDATE_HINT_COMMANDS.get(code, ())


def test_the_command_table_names_only_cases_that_exist():
    assert set(VALIDATE_HINT_COMMANDS) <= set(CASES)


@pytest.mark.parametrize("name", sorted(HAZARD_HINT_COMMANDS))
def test_every_hazard_hint_command_succeeds(name: str, tmp_path: Path):
    src = tmp_path / name
    shutil.copytree(DATA / name / "checkpoint", src)
    assert check_hints(src, tmp_path) == HAZARD_HINT_COMMANDS[name]


def test_every_hostile_hint_names_no_failing_command(tmp_path: Path):
    ran, refused = {}, {}
    for case in hostile_cases():
        dest = tmp_path / case.name
        case.build(dest)
        try:
            commands = check_hints(dest, tmp_path / f"{case.name}-out")
        except Eagle3Error as exc:  # refused before any finding: its code is asserted, its own hint is held to the rule
            refused[case.name] = exc.code
            commands = run_hints([exc.hint], dest, tmp_path / f"{case.name}-out")
        if commands:
            ran[case.name] = commands
    assert refused == HOSTILE_REFUSED
    assert ran == HOSTILE_HINT_COMMANDS


CONVERT_REFUSALS = [  # (sample, --to): refusals whose hint suggests another layout
    ("speculators-trained", "sglang"), ("speculators-trained", "eagle"), ("speculators-trained", "modelopt"),
    ("speculators-fullvocab-qwen3", "sglang"), ("speculators-fullvocab-qwen3", "modelopt"),
    ("h8-sglang-ids-toplevel-only", "vllm"),
]


@pytest.mark.parametrize("name,to", CONVERT_REFUSALS)
def test_convert_refusal_hints_lead_somewhere(name: str, to: str, tmp_path: Path):
    src = DATA / name / "checkpoint"
    target = DATA / "targets" / "llama-tiny"
    base = ["--target", str(target), str(src)]
    result = run_cli("--to", to, *base, str(tmp_path / "out"), "--no-record")
    assert result.exit_code == 1 and "hint:" in result.stderr
    hint = result.stderr.split("hint:", 1)[1]
    suggested = [f.split()[1] for f in TO_FRAGMENT.findall(hint)]
    commands = COMMAND.findall(hint)
    assert suggested or commands or "eagle3-convert" not in hint, hint
    for i, layout in enumerate(suggested):
        again = run_cli("--to", layout, "--verifier", "org/llama-tiny", *base, str(tmp_path / f"s{i}"), "--no-record")
        assert again.exit_code == 0, f"the hint's `--to {layout}` fails too: {again.stderr}"
    for i, command in enumerate(commands):
        code, err = run_hint(command, src, str(src), tmp_path / f"c{i}")
        assert code == 0, f"the hint command `{command}` fails: {err}"


def test_repair_flag_on_a_healthy_map_says_so_not_blames_the_checkpoint(tmp_path: Path):
    """Issue 12: --repair-d2t-absolute on a healthy file said 'the vocab map is inconsistent: re-export it'."""
    result = run_cli("--to", "vllm", "--repair-d2t-absolute", "--no-record", DATA / "specforge-sglang" / "checkpoint",
                     tmp_path / "out")
    assert result.exit_code == 2 and "[E-REPAIR-NOT-NEEDED]" in result.stderr
    assert "drop --repair-d2t-absolute" in result.stderr and "re-export" not in result.stderr


@pytest.mark.parametrize("command", ["convert", "validate"])
def test_a_drafter_given_as_target_is_named_as_such(command: str, tmp_path: Path):
    """Issue 12: a drafter directory passed as --target yielded 'retrain the drafter' (or a silent depth 1)."""
    drafter = DATA / "specforge-sglang" / "checkpoint"
    src = DATA / "speculators-trained" / "checkpoint"
    args = ["--to", "vllm", "--no-record", "--target", drafter, src, tmp_path / "out"] if command == "convert" \
        else ["validate", "--target", drafter, src]
    result = run_cli(*args)
    assert result.exit_code == 1 and "[E-TARGET-IS-DRAFTER]" in result.stderr, result.stderr
    assert "retrain" not in result.stderr and not (tmp_path / "out").exists()


def test_capture_layers_that_contradict_the_config_name_the_way_out(tmp_path: Path):
    """--capture-layers against a config naming other layers is refused (convert never overrides the ids a config
    states); the hint says to drop the flag, and the same command without it converts. A registry record that
    contradicts the config is refused with a hint that keeps the record (its layers), which converts; never one
    that throws the record away (issue 33: no --no-registry, no --correct-record)."""
    example = EXAMPLE
    base = ["--to", "vllm", example]
    stated = run_cli(*base, tmp_path / "a", "--no-record", "--capture-layers", "1,3,6", "--convention", "speculators")
    assert stated.exit_code == 1 and "[E-CAPTURE-RECORD]" in stated.stderr
    assert "hint: drop --capture-layers if config.json is right" in stated.stderr
    assert run_cli(*base, tmp_path / "a", "--no-record").exit_code == 0
    registry = tmp_path / "reg.db"
    assert run_cli("registry", "add", example, "--registry", registry, "--capture-layers", "1,3,6",
                   "--convention", "speculators").exit_code == 0
    recorded = run_cli(*base, tmp_path / "b", "--registry", registry, "--no-record")
    assert recorded.exit_code == 1 and "[E-CAPTURE-RECORD]" in recorded.stderr
    assert "hint: `--capture-layers 1,3,6 --convention boundary` writes the recorded layers" in recorded.stderr
    assert "--no-registry" not in recorded.stderr and "--correct-record" not in recorded.stderr
    assert not (tmp_path / "b").exists()
    assert run_cli(*base, tmp_path / "b", "--registry", registry, "--no-record", "--capture-layers", "1,3,6",
                   "--convention", "boundary").exit_code == 0
