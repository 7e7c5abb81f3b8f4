"""hil/latency_plan.py: latency profiles, a manifest's `latency:` block, and what wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.cli import main
from hil.errors import UsageError
from hil.latency_plan import PROFILES, manifest_declaration, resolve_plans

FIXTURES = Path(__file__).parent / "fixtures"


def _manifest(tmp_path: Path, latency: str) -> Path:
    text = (FIXTURES / "tiny.yaml").read_text().replace("suite: tiny", f"suite: tiny\nlatency: {latency}")
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    (tmp_path / "user_models.py").write_text((FIXTURES / "user_models.py").read_text())
    return path


def test_stable_has_warm_ups_samples_and_a_longer_cool_down() -> None:
    quick, stable = PROFILES["quick"], PROFILES["stable"]
    assert (quick.warmup, quick.iterations) == (0, 1)
    assert stable.warmup >= 3 and stable.iterations >= 20
    assert stable.noise.cooldown_max_s > quick.noise.cooldown_max_s


def test_a_suite_declaration_beats_the_profile_and_the_command_line_beats_both(tmp_path: Path) -> None:
    declared = manifest_declaration(_manifest(tmp_path, "{warmup: 2, iterations: 7, cv_limit: 0.2}"))
    assert declared == ("tiny", {"warmup": 2, "iterations": 7, "cv_limit": 0.2})
    default, suites = resolve_plans("stable", {"tiny": declared[1]}, None, None)
    assert (default.warmup, default.iterations) == (3, 30)
    tiny = suites["tiny"]
    assert (tiny.warmup, tiny.iterations, tiny.noise.cv_limit) == (2, 7, 0.2)
    assert tiny.noise.cooldown_max_s == PROFILES["stable"].noise.cooldown_max_s  # not declared
    _, suites = resolve_plans("quick", {"tiny": declared[1]}, 4, None)
    assert (suites["tiny"].warmup, suites["tiny"].iterations) == (2, 4)


@pytest.mark.parametrize(
    ("latency", "field"),
    [("{iterations: 0}", "latency.iterations"), ("{warmup: 1.5}", "latency.warmup"),
     ("{samples: 3}", "latency.samples"), ("[3, 20]", "latency")],
)
def test_a_bad_latency_block_is_one_line_naming_the_field(tmp_path: Path, latency: str, field: str) -> None:
    with pytest.raises(UsageError, match=f"tiny.yaml: {field}: ") as caught:
        manifest_declaration(_manifest(tmp_path, latency))
    assert "\n" not in str(caught.value)


def test_hil_run_refuses_an_unknown_profile_and_a_bad_block_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--latency", "precise", "--out", str(tmp_path / "o")]) == 3
    assert "--latency: unknown profile 'precise'" in capsys.readouterr().err
    manifest = _manifest(tmp_path, "{iterations: -1}")
    assert main(["run", "--suite", str(manifest), "--out", str(tmp_path / "o")]) == 3
    assert "latency.iterations: expected an integer >= 1, got -1" in capsys.readouterr().err
