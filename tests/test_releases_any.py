"""Any release string, every engine, no crash (issue 34): `--engine ENGINE==RELEASE` with a release the tables do not
hold (older, newer, between, pre/post/dev/local forms) is judged by the nearest known release's rules and says so;
a spelling that is no release number is one usage error naming the known range. Through the real CLI (validate,
convert, search), on real files built here. Releases that the tables knew nothing about ended in
`E-INTERNAL: ValueError: tuple.index(x)` wherever the known releases disagree on a file.

The oracle below reads the known releases with `packaging` itself, not through the module under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter
from conftest import EXAMPLE, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import InvalidVersion, Version
from test_drafters_2026_block import specforge_drafter

from eagle3_convert.engines import releases_of
from eagle3_convert.names import ENGINE_SPELLINGS


def version(release: str) -> Version | None:
    """A release as the engines number them (llama.cpp's builds b<N> by N), or None."""
    build = re.fullmatch(r"b(\d+)", release)
    try:
        return Version(build.group(1) if build else release)
    except (InvalidVersion, ValueError):
        return None


def expected_stand_in(engine: str, release: str) -> str | None:
    """The known release whose rules judge `release`: None when it is a known one; the newest known below it, else
    the oldest; the one known where none can be ordered (TensorRT-LLM's source snapshot)."""
    known = releases_of(engine).known
    named = version(release)
    if release in known or any(version(k) == named for k in known):
        return None
    ordered = [k for k in known if version(k) is not None]
    if not ordered:
        return known[-1]
    below = [k for k in ordered if version(k) < named]
    return below[-1] if below else ordered[0]


def is_release(engine: str, release: str) -> bool:
    return bool(release.strip()) and (release.strip() in releases_of(engine).known or
                                      version(release.strip()) is not None)


_SEG = st.integers(0, 40).map(str)
PEP440 = st.builds(lambda epoch, segs, pre, post, dev, local: f"{epoch}{'.'.join(segs)}{pre}{post}{dev}{local}",
                   st.sampled_from(["", "", "", "1!"]), st.lists(_SEG, min_size=1, max_size=4),
                   st.sampled_from(["", "", "a1", "b2", "rc1", "rc0", "-rc.3", "alpha4"]),
                   st.sampled_from(["", "", ".post1", ".post12", "-2", "post0"]),
                   st.sampled_from(["", "", ".dev0", "dev3"]), st.sampled_from(["", "", "+cu129", "+local.7"]))


def near_known(engine: str) -> st.SearchStrategy[str]:
    """A known release with a suffix: just before, after or between the releases the tables hold."""
    return st.builds(lambda k, suffix: k + suffix, st.sampled_from(releases_of(engine).known),
                     st.sampled_from(["", ".0", ".1", "rc1", ".dev0", ".post7", "+cu128", "a1", "0", "9"]))


GARBAGE = st.one_of(st.sampled_from(["latest", "nightly", "main", "v", "0.5..9", "..", "==", "0.5.9==1", " ", "b",
                                     "b-1", "1" * 5000, "0.5.9 0.5.10", "😀", "0x10", "1.0-foo"]),
                    st.text(max_size=12))


def releases(engine: str) -> st.SearchStrategy[str]:
    builds = st.integers(0, 99999).map(lambda n: f"b{n}")
    return st.one_of(PEP440, near_known(engine), builds, GARBAGE)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files on which the known releases disagree (SGLang: two layers from 0.5.12; vLLM's runners read nested ids
    from 0.22.0), one every release reads alike, and a DFlash drafter (its readers read in the newest release)."""
    root = tmp_path_factory.mktemp("releases-any")
    return {"two-layers": build_drafter(root / "two", "sglang", DrafterSpec(target_layers=8, num_layers=2,
                                                                             capture_boundaries=(1, 3, 6))),
            "nested-ids": build_drafter(root / "nested", "sglang", DrafterSpec(target_layers=8,
                                                                                capture_boundaries=(1, 3, 6))),
            "speculators": EXAMPLE,
            "dflash": specforge_drafter(root / "dflash", "dflash")}


def assert_usage_error(done, release: str) -> None:
    assert done.exit_code == 2, (release, done.exit_code, done.stderr)
    assert "[E-USAGE]" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def codes_by_engine(doc: dict) -> list[tuple[str, str | None]]:
    return sorted((f["code"], f["engine"]) for f in doc["findings"] if f["code"] != "W-ENGINE-RELEASE-UNKNOWN")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_validate_judges_any_release_by_the_nearest_known_and_says_so(files, data) -> None:
    spelling = data.draw(st.sampled_from(ENGINE_SPELLINGS), label="engine")
    release = data.draw(releases(spelling), label="release")
    name = data.draw(st.sampled_from(sorted(files)), label="file")
    done = run_cli("validate", "--json", "--engine", f"{spelling}=={release}", files[name])
    assert "E-INTERNAL" not in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stderr
    if not is_release(spelling, release):
        assert_usage_error(done, release)
        return
    assert done.exit_code in (0, 1), (release, done.stderr)
    doc = json.loads(done.stdout)
    known = releases_of(spelling)
    stand_in = expected_stand_in(spelling, release.strip())
    said = [f for f in doc["findings"] if f["code"] == "W-ENGINE-RELEASE-UNKNOWN"]
    if stand_in is None:
        assert not said, said
        return
    assert doc["releases"] == [f"{known.label} {release.strip()}"], doc["releases"]
    if name == "dflash" and stand_in != known.newest:  # its readers were read in the newest release only
        assert any("drafters were read in" in f["message"] for f in said), said
        return
    assert said and said[0]["message"].startswith(f"{known.label} {release.strip()} is ") and said[0][
        "message"].endswith(f"judged by {stand_in}'s rules"), said
    # the verdict is the stand-in's, finding for finding
    same = run_cli("validate", "--json", "--engine", f"{spelling}=={stand_in}", files[name])
    assert (done.exit_code, codes_by_engine(doc)) == (same.exit_code, codes_by_engine(json.loads(same.stdout)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_convert_judges_any_release_by_the_nearest_known_and_says_so(files, tmp_path_factory, data) -> None:
    spelling = data.draw(st.sampled_from(("sglang", "vllm", "vllm-v1", "speculators", "llamacpp", "trtllm")),
                         label="engine")
    release = data.draw(releases(spelling), label="release")
    layout = data.draw(st.sampled_from(("sglang", "vllm", "speculators")), label="layout")
    dest = tmp_path_factory.mktemp("out") / "out"
    done = run_cli("--to", layout, "--no-record", "--verifier", "org/target", "--engine", f"{spelling}=={release}",
                   files["two-layers"], dest)
    assert "E-INTERNAL" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    if not is_release(spelling, release):
        assert_usage_error(done, release)
        return
    assert done.exit_code in (0, 1), (release, done.stderr)
    stand_in = expected_stand_in(spelling, release.strip())
    line = f"{releases_of(spelling).label} {release.strip()} is "
    if stand_in is not None:  # a note when written; in the refusal's message when the release refuses it
        assert line in done.stdout + done.stderr and f"judged by {stand_in}'s rules" in done.stdout + done.stderr, (
            done.stdout, done.stderr)
    else:
        assert line not in done.stdout + done.stderr


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("search-registry") / "registry.db"
    out = tmp_path_factory.mktemp("search-copy") / "vllm"
    assert run_cli("--to", "vllm", "-q", "--registry", path, EXAMPLE, out).exit_code == 0
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_search_judges_any_release_by_the_nearest_known_and_says_so(registry, data) -> None:
    spelling = data.draw(st.sampled_from(ENGINE_SPELLINGS), label="engine")
    release = data.draw(releases(spelling), label="release")
    done = run_cli("search", "--target", "example-org/tiny-llama-target", "--registry", registry, "--engine",
                   f"{spelling}=={release}")
    assert "E-INTERNAL" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    if not is_release(spelling, release):
        assert_usage_error(done, release)
        return
    assert done.exit_code == 0, done.stderr
    stand_in = expected_stand_in(spelling, release.strip())
    assert (f"judged by {stand_in}'s rules" in done.stdout) == (stand_in is not None), done.stdout
