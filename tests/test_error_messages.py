"""Bad input keeps its cause and speaks words: a YAML syntax error names the line, the column
and PyYAML's problem; unknown names are listed in words with a did-you-mean; no Python repr
(a list, an exception's argument tuple, None) reaches a message. Each is one line, exit 3
(docker not reachable: exit 2 from replicate, a `missing` line from doctor)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hil.cli import main

REPO = Path(__file__).resolve().parents[1]
REPR = re.compile(r"\['|\(\d+, '|Error\(|\bNone\b")
"""What a Python repr looks like in a message: a list of strings, an OSError's argument tuple,
an exception's constructor, None."""


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 3) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert not REPR.search(err), err
    return err.strip()


def test_yaml_syntax_errors_keep_the_line_column_and_problem(tmp_path, capsys) -> None:
    manifest = tmp_path / "suite.yaml"
    manifest.write_text("suite: x\ncases:\n  - id: a\n    tags: [a, b}\n")
    line = error_line(capsys, ["list", "--suite", str(manifest)])
    assert line.startswith(f"hil: error: {manifest}: line 4, column 16: ")
    assert "expected ',' or ']'" in line
    inventory = tmp_path / "boards.yaml"
    inventory.write_text("boards:\n  - name: a\n    adb: [x, y}\n")
    line = error_line(capsys, ["boards", "--inventory", str(inventory)])
    assert line.startswith(f"hil: error: {inventory}: line 3, column 15: expected ',' or ']'")


def test_unknown_names_get_a_suggestion_and_the_allowed_ones_in_words(tmp_path, capsys) -> None:
    manifest = tmp_path / "suite.yaml"
    manifest.write_text("suite: x\ncases:\n  - id: a\n    modul: torch.nn:ReLU\n")
    line = error_line(capsys, ["list", "--suite", str(manifest)])
    assert "modul: unknown field; did you mean 'module'? (allowed: calibration, checker, " in line
    line = error_line(capsys, ["list", "--suite", "smok"])
    assert "--suite smok: no such suite; did you mean 'smoke'?" in line
    line = error_line(capsys, ["boards", "--board", "virtul"])
    assert "did you mean 'virtual'?" in line  # the same helper
    inventory = tmp_path / "boards.yaml"
    inventory.write_text("boards:\n  - {name: a, adb: X1, chipest: E9955}\n")
    line = error_line(capsys, ["boards", "--inventory", str(inventory)])
    assert "chipest: unknown field; did you mean 'chipset'? (allowed: " in line


def test_no_list_repr_when_no_case_matches(capsys) -> None:
    line = error_line(capsys, ["list", "--suite", "smoke", "--filter", "zzz", "--filter", "a b"])
    assert line == "hil: error: no case matches --suite smoke --precision fp32 --filter zzz --filter 'a b'"


def test_a_foreign_json_is_named_as_such(tmp_path, capsys) -> None:
    foreign = tmp_path / "other.json"
    foreign.write_text('{"name": "not ours"}')
    line = error_line(capsys, ["report", str(foreign)])
    assert line == (f"hil: error: {foreign}: not a hil results document (its field 'schema' is "
                    "missing, a hil results.json says exynos-hil/results)")


def test_an_unreachable_docker_engine_is_said_in_words(tmp_path, capsys, monkeypatch) -> None:
    from hil.doctor import check_docker

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    check = check_docker()
    assert not check.ok and check.detail.endswith(": No such file or directory"), check.detail
    assert not REPR.search(check.detail), check.detail
    monkeypatch.chdir(REPO)
    line = error_line(capsys, ["replicate", "--build-only"], code=2)
    assert line.endswith("docker engine not reachable (" f"unix://{tmp_path}/no-docker.sock): "
                         "No such file or directory")
