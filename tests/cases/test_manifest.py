"""User manifests: a user's own module runs; malformed ones fail on one line naming the field."""

from pathlib import Path

import pytest

from hil.cases.manifest import load_manifest
from hil.errors import UsageError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_manifest_loads_cases_from_the_users_module():
    cases = load_manifest(FIXTURES / "mismatch.yaml")
    assert [c.id for c in cases] == ["mlp_ok", "export_differs"]
    assert cases[0].suite == "fixture"
    module = cases[0].factory()
    assert module.net[0].out_features == 12  # kwargs reached the factory
    assert cases[1].tolerance.atol == 0.01
    assert cases[0].line == 4 and cases[1].line == 10


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    (tmp_path / "user_models.py").write_text((FIXTURES / "user_models.py").read_text())
    return path


GOOD = """
cases:
  - id: a
    module: "user_models:make_mlp"
    inputs: [{shape: [1, 8]}]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cases: []", "cases: expected a non-empty list"),
        ("cases:\n  - module: 'user_models:make_mlp'\n    inputs: [{shape: [1]}]", r"cases\[0\]: id: required"),
        ("cases:\n  - id: a\n    inputs: [{shape: [1]}]", r"cases\[0\] \(a\): module: required"),
        (GOOD.replace("[1, 8]", "[1, x]"), r"inputs\[0\]\.shape: expected a list of positive integers"),
        (GOOD.replace("{shape: [1, 8]}", "{shape: [1, 8], dtype: float128}"), r"inputs\[0\]\.dtype: unknown dtype 'float128'"),
        (GOOD.replace("user_models:make_mlp", "no_such_pkg.mod:f"), "module: cannot import 'no_such_pkg.mod'"),
        (GOOD.replace("user_models:make_mlp", "user_models:nothing"), "module: 'user_models' has no callable 'nothing'"),
        (GOOD + "    tolerance: {atol: fast}\n", "tolerance.atol: expected a non-negative number"),
        (GOOD + "    precision: int4\n", "precision: expected fp32, a8w8, all"),
        (GOOD + "    colour: red\n", "colour: unknown field"),
        ("cases: [", "not a readable YAML manifest"),
    ],
)
def test_malformed_manifest_names_file_entry_and_field(tmp_path, text, expected):
    path = _write(tmp_path, text)
    with pytest.raises(UsageError, match=expected) as info:
        load_manifest(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message


def test_missing_manifest_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="manifest file not found"):
        load_manifest(tmp_path / "absent.yaml")


def test_precision_all_gives_one_case_per_precision(tmp_path):
    cases = load_manifest(_write(tmp_path, GOOD + "    precision: all\n"))
    assert [c.precision for c in cases] == ["fp32", "a8w8"]
