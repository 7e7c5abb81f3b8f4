"""action.yml's shell steps, run as the GitHub runner does (tests/container/action_runner.py)
with stub python3/pip/docker/hil (stubs.py): a lab's inputs reach `hil run`, the outputs
count what a workflow needs, and the launcher installs from a wheelhouse or not at all.
No docker, no network: about 2 s in all."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.report.results import save_results
from tests.container.action_runner import run_action
from tests.report import case, sample_results

from .stubs import REPO, calls, make_stubs


def _results(path: Path) -> Path:
    document = sample_results()
    document["cases"] = [
        case("s", "fp32", "a", "PASS"), case("s", "fp32", "b", "XPASS"),
        case("s", "fp32", "c", "FAIL_RUN"), case("s", "fp32", "d", "SKIP"),
        case("s", "fp32", "e", "XFAIL"), case("s", "fp32", "f", "ERROR_INFRA"),
        case("s", "fp32", "g", "PASS_UNDELEGATED"),
    ]
    save_results(document, path)
    return path


@pytest.fixture
def lab(tmp_path: Path):
    workspace, temp = tmp_path / "ws", tmp_path / "temp"
    workspace.mkdir()
    temp.mkdir()
    (workspace / "conv_file").write_text("")  # a glob in `filter` must not expand to it
    env = make_stubs(tmp_path / "stubs")
    env.update(STUB_RESULTS=str(_results(tmp_path / "canned.json")), STUB_RC="1")

    def run(**inputs: str):
        return run_action(REPO, {"boards": "R3CX123", **inputs}, workspace, temp, env)

    return run, env, workspace


def _hil_run(env) -> list[str]:
    (argv,) = [a for a in calls(env, "hil")
               if "--" in a and a[a.index("--") + 1] == "run" and "--print" not in a]
    return argv


def test_a_labs_inputs_reach_hil_run(lab) -> None:
    run, env, workspace = lab
    done = run(**{"adb-server": "lab-host:5037", "board-wait": "30", "retries": "2",
                  "filter": "conv* ops.a8w8.*", "args": "--exclude 'models.*' --tag \"a b\"",
                  "localize": "true", "cache-dir": "hil-cache"})
    assert done.exit_code == 1, done.stdout + done.stderr  # the run's own exit code
    argv = _hil_run(env)
    inner = argv[argv.index("--") + 1:]
    for pair in (["--adb-server", "lab-host:5037"], ["--board-wait", "30"], ["--retries", "2"],
                 ["--filter", "conv*"], ["--filter", "ops.a8w8.*"], ["--exclude", "models.*"],
                 ["--tag", "a b"]):
        assert any(inner[i:i + 2] == pair for i in range(len(inner))), (pair, inner)
    assert "--localize" in inner
    outer = argv[:argv.index("--")]
    assert outer[outer.index("--cache-dir") + 1] == str(workspace / "hil-cache")
    assert (workspace / "hil-cache").is_dir()


def test_the_outputs_count_what_a_workflow_needs(lab) -> None:
    run, env, _ = lab
    done = run()
    assert done.outputs["passed"] == "2"
    assert done.outputs["failed"] == "2"  # FAIL_RUN and XPASS: both fail the run
    assert done.outputs["errors"] == "1"
    assert done.outputs["skipped"] == "1" and done.outputs["xfail"] == "1"
    assert done.outputs["virtual"] == "true"
    assert done.outputs["summary-path"] == "hil-out/summary.md"


def test_args_with_an_unbalanced_quote_is_an_error_not_a_guess(lab) -> None:
    run, env, _ = lab
    done = run(args="--tag 'oops")
    assert done.exit_code != 0 and "args: cannot be split (an unbalanced quote?)" in done.stdout
    assert "oops" not in done.stdout  # the input is named, its value never echoed
    assert not [a for a in calls(env, "hil") if "run" in a]


def test_the_launcher_installs_from_a_wheelhouse_without_an_index(lab) -> None:
    run, env, workspace = lab
    run(launcher="wheelhouse", wheelhouse="wheels")
    pips = calls(env, "pip")
    assert len(pips) == 2 and all(f"--no-index --find-links {workspace}/wheels" in p for p in pips)
    done = run(launcher="wheelhouse")
    assert done.exit_code == 1 and "needs the wheelhouse input" in done.stdout


def test_the_image_launcher_installs_nothing_and_runs_replicate_in_the_image(lab) -> None:
    run, env, _ = lab
    assert "needs the image input" in run(launcher="image").stdout
    done = run(launcher="image", image="exynos-hil:prebuilt", **{"cache-dir": "/tmp/hil-c"})
    assert done.exit_code == 1, done.stdout + done.stderr
    assert calls(env, "pip") == [] and not any(a[:2] == ["-m", "venv"] for a in calls(env, "python3"))
    dockers = calls(env, "docker")
    assert dockers and all(a[0] == "run" and "/var/run/docker.sock:/var/run/docker.sock" in a
                           for a in dockers)
    assert any("/tmp/hil-c:/tmp/hil-c" in a for a in dockers)
    assert done.outputs["failed"] == "2"


def test_replicate_binds_the_lowering_cache_into_the_container(tmp_path: Path, capsys, monkeypatch) -> None:
    from hil.cli import main

    monkeypatch.delenv("HIL_CACHE_DIR", raising=False)
    cache = tmp_path / "cache"
    assert main(["replicate", "--print", "--image", "x", "--access", "none", "--workspace",
                 str(tmp_path), "--cache-dir", str(cache), "--", "lower", "--out", "o"]) == 0
    line = capsys.readouterr().out
    assert f"-v {cache}:/var/cache/exynos-hil:rw" in line
    assert "-e HIL_CACHE_DIR=/var/cache/exynos-hil" in line and cache.is_dir()
    monkeypatch.setenv("HIL_CACHE_DIR", str(cache))  # the host's own cache by default
    from hil.cli import build_parser
    assert build_parser().parse_args(["replicate", "--", "run"]).cache_dir == str(cache)
