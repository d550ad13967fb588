"""What a new user hit (issue 25), each case run as the user ran it: the real CLI on real files, the
loopback Hub of tests/hub_server.py for publish, and what is printed, written or left untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, snapshot_download

from conftest import EXAMPLE, run_cli
from eagle3_convert.engines import SERVING, release
from hub_server import HubServer

# huggingface_hub PUTs LFS content with `data=<file>`, which httpx deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_first_use_token"
REPO = "test-user/first-drafter"


# ---------------------------------------------------------------------------------- 1. the model card

# The card's section for each engine (the speculators library is served through vLLM's command).
CARD_SECTIONS = {"vllm-v1": "### vLLM", "vllm-v2": "### vLLM", "sglang": "### SGLang",
                 "trtllm": "### TensorRT-LLM", "llamacpp": "### llama.cpp"}


def _serving(layout: str, tmp_path: Path) -> set[str]:
    """The engines convert says serve the example in `layout` as trained (its `--json` verdicts)."""
    result = run_cli("--to", layout, EXAMPLE, tmp_path / f"as-{layout}", "--no-registry", "--json")
    assert result.exit_code == 0, result.stderr
    return {engine for engine, v in json.loads(result.stdout)["serves"].items() if v["verdict"] in SERVING}


def _section(card: str, heading: str) -> str:
    return card.split(heading, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


@pytest.mark.parametrize("layout", ["speculators", "sglang", "vllm", "modelopt"])
def test_the_card_has_a_serve_command_for_every_engine_that_serves_it(hub: HubServer, tmp_path: Path, layout: str):
    serving = _serving(layout, tmp_path)
    result = run_cli("publish", EXAMPLE, REPO, "--layout", layout, "--endpoint", hub.url, "--token", TOKEN,
                     "--no-record", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)["card"]
    for engine, heading in CARD_SECTIONS.items():
        shown = heading in card
        assert shown == any(e in serving for e, h in CARD_SECTIONS.items() if h == heading), (engine, layout)
        if shown:  # each command names the release it was judged for
            assert f"Judged for {release(engine)}" in _section(card, heading), (heading, layout)
    assert ("### vLLM" in card) and ("vllm serve example-org/tiny-llama-target" in card)  # every layout: vLLM serves
    if "sglang" in serving:
        assert "--speculative-draft-model-path test-user/first-drafter" in _section(card, "### SGLang")
    if "trtllm" in serving:
        assert "eagle3_layers_to_capture: [1, 3, 4]" in _section(card, "### TensorRT-LLM")
    if "llamacpp" in serving:
        llama = _section(card, "### llama.cpp")
        assert "eagle3-convert --to gguf test-user/first-drafter first-drafter-gguf --target-gguf TARGET.gguf" in llama
        assert "llama-server -m TARGET.gguf -md first-drafter-gguf/eagle3-first-drafter-BF16.gguf" in llama
        assert "--spec-type draft-eagle3" in llama


def test_the_published_card_names_the_releases_and_reads_as_english(hub: HubServer, tmp_path: Path):
    result = run_cli("publish", EXAMPLE, REPO, "--layout", "sglang", "--endpoint", hub.url, "--token", TOKEN,
                     "--no-record")
    assert result.exit_code == 0, result.stderr
    snapshot = Path(snapshot_download(REPO, endpoint=hub.url, token=TOKEN, cache_dir=tmp_path / "dl"))
    card = ModelCard.load(snapshot / "README.md").text
    assert "Judged for vLLM 0.33.0 (V1 and V2 runners): captures [2, 4, 5], trained maths." in card
    assert "Judged for SGLang 0.5.23: captures [2, 4, 5], trained maths." in card
    assert "Judged for llama.cpp b11434:" in card and "Judged for TensorRT-LLM, 2026 sources:" in card
    assert "replaying how SGLang loads them:" in card and "load them" not in card.replace("loads them", "")


def test_a_card_for_two_engines_says_load(hub: HubServer):
    result = run_cli("publish", EXAMPLE, REPO, "--endpoint", hub.url, "--token", TOKEN, "--no-record", "--dry-run",
                     "--json")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)["card"]
    assert "replaying how speculators and vLLM load them:" in card
    assert "### SGLang" not in card  # SGLang refuses a speculators config: no command that would fail


# ---------------------------------------------------------------------------- 2. what --to gguf wrote

def test_to_gguf_names_the_file_it_wrote_and_the_llama_server_line(tmp_path: Path):
    pytest.importorskip("gguf", reason="--to gguf needs the gguf package (eagle3-convert[gguf])")
    from gguf_target import write_target_gguf

    from eagle3_convert.schemas import output_violations

    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=64, vocab=512)
    dst = tmp_path / "tiny-gguf"
    result = run_cli("--to", "gguf", EXAMPLE, dst, "--target-gguf", target, "--no-registry")
    assert result.exit_code == 0, result.stderr
    written = dst / "eagle3-tiny-BF16.gguf"
    assert written.is_file()
    lines = result.stdout.splitlines()
    assert lines[0] == f"wrote {written} (gguf): 14 tensors, 130.0 KiB"
    assert (f"serve it with the target's GGUF: llama-server -m {target} -md {written} --spec-type draft-eagle3 "
            "--spec-draft-n-max 3 --spec-draft-p-min 0.0 -np 1 -fa on") in lines
    # The engines that cannot open a GGUF say so once, without repeating their own name.
    assert "  SGLang 0.5.23                            refuses it loudly: a GGUF is llama.cpp's format, not one this " \
           "engine loads" in lines

    again = run_cli("--to", "gguf", EXAMPLE, dst, "--target-gguf", target, "--no-registry", "--force", "--json")
    assert again.exit_code == 0, again.stderr
    summary = json.loads(again.stdout)
    assert output_violations(summary) == []
    assert summary["llama_server"]["gguf"] == str(written)
    assert summary["llama_server"]["argv"][:5] == ["llama-server", "-m", str(target), "-md", str(written)]

    other = run_cli("--to", "vllm", EXAMPLE, tmp_path / "vllm", "--no-registry", "--json")
    assert json.loads(other.stdout)["llama_server"] is None


# ------------------------------------------------------------------------- 3. lines that say things once

def _capture_line(result) -> str:
    assert result.exit_code == 0, result.stderr
    return next(line for line in result.stdout.splitlines() if line.startswith("capture layers:"))


def test_convert_names_each_layout_once_and_only_configs_that_hold_ids(tmp_path: Path, sample):
    same = run_cli("--to", "speculators", EXAMPLE, tmp_path / "same", "--no-registry")
    assert _capture_line(same) == "capture layers: boundaries [2, 4, 5]; as written for speculators: [2, 4, 5]"
    other = run_cli("--to", "sglang", EXAMPLE, tmp_path / "sglang", "--no-registry")
    assert _capture_line(other) == ("capture layers: boundaries [2, 4, 5]; as read from speculators: [2, 4, 5]; "
                                    "as written for sglang: [1, 3, 4]")
    # EAGLE's config holds no ids (it hard-codes the defaults, the trained layers on this 8-layer target).
    from conftest import DATA

    eagle = run_cli("--to", "eagle", EXAMPLE, tmp_path / "eagle", "--target", DATA / "targets" / "llama-tiny",
                    "--no-registry")
    line = _capture_line(eagle)
    assert "as written for eagle" not in line and "the eagle config holds none" in line
    assert "eagle_aux_hidden_state_layer_ids" not in (tmp_path / "eagle" / "config.json").read_text()

    # A SpecForge export that lost its ids: they come from --capture-layers, and the source is not said to spell them.
    src = sample("specforge-sglang")
    config = json.loads((src / "config.json").read_text())
    del config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    (src / "config.json").write_text(json.dumps(config))
    given = run_cli("--to", "sglang", src, tmp_path / "given", "--capture-layers", "1,3,4", "--convention",
                    "specforge", "--no-registry")
    assert _capture_line(given) == "capture layers: boundaries [2, 4, 5]; as written for sglang: [1, 3, 4]"
    assert "taken from --capture-layers (specforge ids [1, 3, 4]): config.json names none" in given.stdout


def test_search_prints_one_line_per_copy_and_details_under_verbose(tmp_path: Path):
    registry = tmp_path / "registry.db"
    for layout in ("speculators", "sglang", "vllm", "modelopt"):
        assert run_cli("--to", layout, EXAMPLE, tmp_path / layout, "--registry", registry).exit_code == 0
    short = run_cli("search", "--target", "example-org/tiny-llama-target", "--registry", registry)
    assert short.exit_code == 0, short.stderr
    lines = short.stdout.splitlines()
    assert len(lines) == 1 + 5  # the drafter, and its five copies (the example and four conversions)
    assert lines[0].startswith("drafter ") and "boundaries [2, 4, 5]" in lines[0]
    sglang = next(line for line in lines if line.startswith("  sglang "))
    assert sglang.endswith("as-trained: vllm-v1 vllm-v2 sglang llamacpp; runtime-layers: trtllm; refuses: speculators")

    verbose = run_cli("search", "--target", "example-org/tiny-llama-target", "--registry", registry, "--verbose")
    assert verbose.exit_code == 0, verbose.stderr
    detail = [line for line in verbose.stdout.splitlines() if not line.startswith("      across releases: ")]
    assert len(detail) == 1 + 5 * (1 + 6)  # each copy, and a line per engine (and where releases disagree, one more)
    assert "    vLLM (V1 runner) 0.33.0              as-trained      captures [2, 4, 5], trained maths" in detail
    # --to vllm writes layers.0.*, which SGLang loads from 0.5.12 on only
    assert "      across releases: served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11 (SGLang drops " \
           "layers.0.* weights" in verbose.stdout
    assert not any(line.count("[2, 4, 5]") > 1 for line in detail)  # the layers are named once per line


def test_inspect_calls_a_gguf_s_metadata_its_keys(tmp_path: Path):
    pytest.importorskip("gguf", reason="--to gguf needs the gguf package (eagle3-convert[gguf])")
    from gguf_target import write_target_gguf

    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=64, vocab=512)
    assert run_cli("--to", "gguf", EXAMPLE, tmp_path / "d", "--target-gguf", target, "--no-registry").exit_code == 0
    shown = run_cli("inspect", tmp_path / "d")
    assert shown.exit_code == 0, shown.stderr
    assert "config.json" not in shown.stdout and "    _gguf:" not in shown.stdout
    assert "  metadata     eagle3-d-BF16.gguf's keys as stored (19 keys; 512 tokenizer tokens not shown)" in shown.stdout
    assert "    eagle3.target_layers: [2, 4, 5]" in shown.stdout


# ------------------------------------------------------------------------------- 4. a read never writes

def _tables(registry) -> list[str]:
    from registry_backends import is_postgres, sql

    if is_postgres(registry):
        return sorted(r[0] for r in sql(registry, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))
    return sorted(r[0] for r in sql(registry, "SELECT name FROM sqlite_master WHERE type = 'table'"))


LOOKUPS = [("registry", "list"), ("registry", "list", "--json"), ("registry", "show", "abcd"),
           ("registry", "lineage", "abcd"), ("registry", "remove", "abcd"), ("search", "--target", "org/model"),
           ("search", "--target", "org/model", "--json"), ("validate", EXAMPLE)]


def _look_everywhere(registry) -> None:
    from eagle3_convert.schemas import output_violations

    for args in LOOKUPS:
        result = run_cli(*args, "--registry", registry)
        said = result.stdout + result.stderr
        assert "Traceback" not in said
        if args[0] == "validate":  # its lookup finds no record: the checkpoint is valid as before
            assert result.exit_code == 0, said
        elif args[1] in ("show", "lineage", "remove"):  # no drafter can be found: one line, exit 1
            assert result.exit_code == 1 and "no registry here:" in result.stderr, said
            assert "[E-REGISTRY-NONE]" in result.stderr and "hint:" in result.stderr
        else:  # an answer: nothing is recorded there
            assert result.exit_code == 0 and "no registry here:" in result.stdout, said
            if "--json" in args:
                doc = json.loads(result.stdout)
                assert output_violations(doc) == [] and doc["no_registry"].startswith("no registry here:")


def test_a_lookup_where_there_is_no_registry_creates_nothing(registry_url, tmp_path: Path):
    from registry_backends import is_postgres, sql

    _look_everywhere(registry_url)
    if is_postgres(registry_url):
        assert _tables(registry_url) == []  # the empty database is left empty
    else:
        assert not registry_url.parent.exists()  # no file, not even its folder

    # A database (or SQLite file) holding someone else's tables: looked at, not touched.
    if not is_postgres(registry_url):
        registry_url.parent.mkdir()
    sql(registry_url, "CREATE TABLE bookmarks (url TEXT)", "INSERT INTO bookmarks VALUES ('https://example.org')")
    before = None if is_postgres(registry_url) else registry_url.read_bytes()
    _look_everywhere(registry_url)
    assert _tables(registry_url) == ["bookmarks"]
    assert sql(registry_url, "SELECT url FROM bookmarks") == [("https://example.org",)]
    if before is not None:
        assert registry_url.read_bytes() == before and sorted(p.name for p in registry_url.parent.iterdir()) == [
            registry_url.name]  # not switched to WAL: no -wal or -shm beside it


def test_only_a_writing_command_creates_the_registry(registry_url, tmp_path: Path):
    from registry_backends import is_postgres

    assert run_cli("registry", "list", "--registry", registry_url).exit_code == 0
    written = run_cli("--to", "sglang", EXAMPLE, tmp_path / "out", "--registry", registry_url)
    assert written.exit_code == 0, written.stderr
    assert {"drafters", "locations", "lineage", "aliases"} <= set(_tables(registry_url))
    listed = run_cli("registry", "list", "--registry", registry_url)
    assert listed.exit_code == 0 and "no registry here" not in listed.stdout
    assert "example-org/tiny-llama-target" in listed.stdout
    if not is_postgres(registry_url):
        assert registry_url.is_file()


# ----------------------------------------------------------------- 5. one message, one exit code per mistake

def _kinds_of_wrong_target_gguf(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    from gguf_target import write_target_gguf

    folder = tmp_path / "models"
    folder.mkdir()
    write_target_gguf(folder / "target.gguf", layers=8, hidden=64, vocab=512)
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("not a gguf\n")
    drafter = tmp_path / "drafter"
    assert run_cli("--to", "gguf", EXAMPLE, drafter, "--target-gguf", folder / "target.gguf",
                   "--no-registry").exit_code == 0
    return {
        "folder": (folder, f"--target-gguf {folder} is a folder, not a GGUF file"),
        "missing": (tmp_path / "nowhere.gguf", f"--target-gguf {tmp_path / 'nowhere.gguf'}: no such file"),
        "not a GGUF": (bogus, f"--target-gguf {bogus} is not a GGUF file"),
        "a drafter": (drafter / "eagle3-drafter-BF16.gguf",
                      f"--target-gguf {drafter / 'eagle3-drafter-BF16.gguf'} is an EAGLE-3 drafter, not a target model"),
    }


@pytest.mark.parametrize("command", ["convert", "publish"])
def test_every_wrong_target_gguf_is_bad_input_with_its_own_line(hub: HubServer, tmp_path: Path, command: str):
    pytest.importorskip("gguf", reason="--to gguf needs the gguf package (eagle3-convert[gguf])")
    dst = tmp_path / "out"

    def run(*extra):
        if command == "convert":
            return run_cli("--to", "gguf", EXAMPLE, dst, "--no-registry", *extra)
        return run_cli("publish", EXAMPLE, REPO, "--layout", "gguf", "--endpoint", hub.url, "--token", TOKEN,
                       "--no-record", "--dry-run", *extra)

    for kind, (path, message) in _kinds_of_wrong_target_gguf(tmp_path).items():
        result = run("--target-gguf", path)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 1, (kind, result.exit_code, result.stderr)  # bad input, whatever the kind
        assert lines[-1].startswith(f"error: {message} [E-GGUF-TARGET] — hint: pass the target model's .gguf file"), \
            (kind, lines)
        assert "Traceback" not in result.stderr and not dst.exists()
    hinted = run("--target-gguf", tmp_path / "models").stderr
    assert f"e.g. {tmp_path / 'models' / 'target.gguf'}" in hinted  # the folder's GGUF is named
    absent = run()  # leaving the option out is a usage error
    assert absent.exit_code == 2 and "[E-GGUF-TARGET]" in absent.stderr and "--target-gguf PATH" in absent.stderr


# -------------------------------------------------------------------- 6. the Python API and the CLI

def _api_example() -> list[str]:
    """The Python example of docs/api.md (it was the README's)."""
    from conftest import REPO

    text = (REPO / "docs" / "api.md").read_text()
    block = text.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_the_api_example_runs_and_records_only_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]):
    import shutil

    from eagle3_convert.registry.store import open_registry

    shutil.copytree(EXAMPLE, tmp_path / "examples" / "tiny-llama-speculators")
    monkeypatch.chdir(tmp_path)
    registry = tmp_path / "api-registry.db"
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(registry))
    lines = _api_example()
    assert any(line.startswith("record_conversion(result)") for line in lines)  # said beside the example
    exec("\n".join(line for line in lines if not line.startswith("record_conversion")), {})
    assert (tmp_path / "build" / "api-sglang" / "config.json").is_file() and not registry.exists()  # no record
    exec("\n".join(lines), {})
    with open_registry(registry) as store:
        [record] = store.list()
    assert {location.layout for location in record.locations} == {"speculators", "sglang"}
    assert record.drafter_id in capsys.readouterr().out

    # The CLI, by contrast, records by default.
    cli_registry = tmp_path / "cli-registry.db"
    assert run_cli("--to", "vllm", EXAMPLE, tmp_path / "cli-vllm", "--registry", cli_registry).exit_code == 0
    assert cli_registry.is_file()


# ---------------------------------------------------- 7. a ModelOpt export's YaRN, into SGLang (SpecForge)

EXPORTED_YARN = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}  # ModelOpt's default


def _modelopt_export(tmp_path: Path) -> Path:
    from builders import DrafterSpec, build_drafter

    src = build_drafter(tmp_path / "modelopt-export", "modelopt", DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_scaling"] = dict(EXPORTED_YARN)
    (src / "config.json").write_text(json.dumps(config, indent=2))
    return src


def test_sglang_gets_yarn_written_out_and_the_export_s_yarn_is_said(tmp_path: Path):
    from conftest import tree_digest
    from eagle3_convert.convert import read_source

    src = _modelopt_export(tmp_path)
    before = tree_digest(src)
    said = "which ModelOpt's exporter injects (eagle_export_rope_scaling) into drafters trained without rope scaling"

    checked = run_cli("validate", src, "--json")
    assert checked.exit_code == 0, checked.stdout
    [finding] = [f for f in json.loads(checked.stdout)["findings"] if f["code"] == "I-ROPE-EXPORT-YARN"]
    assert said in finding["message"] and finding["where"] == "$.rope_scaling"
    assert said in run_cli("validate", src).stdout

    dst = tmp_path / "sglang"
    converted = run_cli("--to", "sglang", src, dst, "--no-registry")
    assert converted.exit_code == 0, converted.stderr
    assert f"note: the config's rope scaling is YaRN (factor 32.0, original_max_position_embeddings 2048), {said}" \
        in converted.stdout
    written = json.loads((dst / "config.json").read_text())["rope_scaling"]
    # transformers' reading spelled out: betas 32/1, and mscale 1 over mscale_all_dim 0, the same attention factor
    # 0.1 ln(factor) + 1 (SpecForge 0.2.0 fails on any of the four absent: it passes None over its defaults)
    assert written == {**EXPORTED_YARN, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}
    assert tree_digest(src) == before  # SRC untouched

    # The same maths and the same drafter: the id is unchanged and --to modelopt gives the export's config back.
    assert read_source(str(dst)).drafter.config.rope == read_source(str(src)).drafter.config.rope
    back = tmp_path / "back"
    assert run_cli("--to", "modelopt", dst, back, "--no-registry").exit_code == 0
    assert json.loads((back / "config.json").read_text())["rope_scaling"] == EXPORTED_YARN
    ids = {json.loads((p / "eagle3-convert.json").read_text())["drafter_id"] for p in (dst, back)}
    assert len(ids) == 1

    # A non-ModelOpt source with YaRN is not said to carry ModelOpt's injection; the values it gives are kept.
    vllm = tmp_path / "vllm"
    assert run_cli("--to", "vllm", src, vllm, "--no-registry").exit_code == 0
    assert "I-ROPE-EXPORT-YARN" not in run_cli("validate", vllm, "--json").stdout
    explicit = {**EXPORTED_YARN, "beta_fast": 16.0, "beta_slow": 2.0}
    config = json.loads((vllm / "config.json").read_text())
    config["rope_scaling"] = explicit
    (vllm / "config.json").write_text(json.dumps(config))
    assert run_cli("--to", "sglang", vllm, tmp_path / "sglang2", "--no-registry").exit_code == 0
    assert json.loads((tmp_path / "sglang2" / "config.json").read_text())["rope_scaling"] == {
        **explicit, "mscale": 1.0, "mscale_all_dim": 0.0}


# ------------------------------------------------------ 8. the benchmark command (docs/benchmarks.md, once the README's)

def test_the_benchmarks_page_leads_with_the_quick_benchmark_and_says_what_the_full_one_costs(monkeypatch: pytest.MonkeyPatch):
    import importlib

    from conftest import REPO

    section = (REPO / "docs" / "benchmarks.md").read_text().split("# Benchmarks", 1)[1].split("\n## ", 1)[0]
    commands = section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert commands[0].startswith("python benchmarks/run.py --quick ")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    run = importlib.import_module("run")
    # What the comment beside --quick says is what --quick runs.
    assert run.QUICK["sizes"] == "8b" and run.QUICK["runs"] == 1
    assert "1 run, " + " <-> ".join(run.QUICK["layouts"].split(",")) in commands[0]
    assert "under 2 minutes" in commands[0] and "under 2 minutes" in run.__doc__
    # The plain command is the full run, and the text says what it costs.
    assert commands[1].startswith("python benchmarks/run.py ") and "--" not in commands[1].split("#")[0]
    assert run.FULL["sizes"] == "8b,8b-embed,kimi" and run.FULL["runs"] == 3 and "bin" in run.FULL["inputs"]
    assert "about 25 GB" in section and "3 times each" in section and "half an hour" in section
