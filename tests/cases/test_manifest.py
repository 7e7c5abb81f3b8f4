"""User manifests: a user's own module runs; malformed ones fail on one line naming the field."""

import json
import subprocess
import sys
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


def test_a_json_manifest_reads_as_json_with_each_entrys_line(tmp_path):
    # a generated sweep's manifest is often JSON (which is YAML): read by json, its numbers
    # as JSON means them (YAML 1.1 reads `1e-3` as a string), the lines from the parser
    entries = [{"id": f"c{i}", "module": "user_models:make_mlp", "inputs": [{"shape": [1, 8]}],
                "tolerance": {"atol": 1e-3}} for i in range(3)]
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"suite": "gen", "cases": entries}, indent=1).replace("0.001", "1e-3"))
    (tmp_path / "user_models.py").write_text((FIXTURES / "user_models.py").read_text())
    cases = load_manifest(path)
    assert [c.id for c in cases] == ["c0", "c1", "c2"]
    assert [c.tolerance.atol for c in cases] == [0.001] * 3
    text = path.read_text().splitlines()
    assert [text[c.line - 1].strip() for c in cases] == ["{"] * 3  # each entry's own line
    assert len({c.line for c in cases}) == 3


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


def test_manifest_with_dataset_checker_and_input_functions():
    cases = load_manifest(FIXTURES / "checked.yaml")
    assert [c.key for c in cases] == [
        "checked.fp32.tiny_classifier", "checked.a8w8.tiny_classifier",
        "checked.fp32.add_user_inputs", "checked.a8w8.add_user_inputs",
    ]
    classifier, _, add, _ = cases
    assert classifier.inputs == () and classifier.dataset.count == 16
    assert classifier.checker.name == "classifier" and classifier.checker.params["topk"] == {1: 0.5, 3: 0.8}
    assert classifier.atol_scale_steps == 2.0 and classifier.tolerance.atol == 1e-3
    batch = classifier.dataset.batch(0, classifier.seed)
    assert tuple(batch.inputs[0].shape) == (16, 3, 32, 32) and batch.targets.shape == (16,)
    x, y = add.input_fn(add.seed)
    assert x.shape == (1, 4, 4) and float(y.sum()) == 16.0
    assert len(add.calibration()) == 4


def test_image_folder_dataset_reads_class_folders(tmp_path):
    from PIL import Image

    for label, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / "images" / label).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (40, 30), colour).save(tmp_path / "images" / label / f"{i}.png")
    path = _write(tmp_path, GOOD.replace("inputs: [{shape: [1, 8]}]",
                                         "dataset: {kind: image_folder, root: images, size: 16, resize: 20, count: 3}"))
    (case,) = load_manifest(path)
    batch = case.dataset.batch(1, 0)  # images 3, 4, 5 of 4: wraps around
    assert tuple(batch.inputs[0].shape) == (3, 3, 16, 16)
    assert batch.targets.tolist() == [1, 0, 0]
    red = batch.inputs[0][1, 0].mean()  # a cat: red channel high after normalisation
    assert red > 2.0 and batch.inputs[0][0, 2].mean() > 2.0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    dataset: {kind: imagenet}\n", "dataset: unknown dataset kind 'imagenet'"),
        ("    dataset: {kind: generated_images, count: many}\n", "dataset: count: expected a positive integer"),
        ("    dataset: {kind: image_folder, root: nowhere}\n", "dataset: not a folder"),
        ("    dataset: {kind: image_folder}\n", "dataset: root: required"),
        ("    dataset: generated_images\n", "dataset: expected a mapping with a 'kind'"),
        ("    checker: accuracy\n", "checker: unknown checker 'accuracy'"),
        ("    checker: {name: classifier, topk: 3}\n", "checker: topk: expected a mapping"),
        ("    checker: {topk: {1: 0.9}}\n", "checker: expected a checker name"),
        ("    calibration: 'user_models:nothing'\n", "calibration: 'user_models' has no callable 'nothing'"),
        ("    require_delegation: sometimes\n", "require_delegation: expected true or false"),
        ("    tolerance: {scale_steps: -1}\n", "tolerance.scale_steps: expected a non-negative number"),
        ("    expect: {verdict: PASS, reason: x}\n", "expect: verdict: expected one of FAIL_EXPORT"),
        ("    expect: {verdict: FAIL_RUN}\n", "expect: reason: required"),
        ("    skip: ''\n", "skip: expected one line of text"),
    ],
)
def test_malformed_new_fields_name_the_field(tmp_path, extra, expected):
    path = _write(tmp_path, GOOD + extra)
    with pytest.raises(UsageError, match=expected) as info:
        load_manifest(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unimportable_input_function_is_a_usage_error(tmp_path):
    path = _write(tmp_path, GOOD.replace("inputs: [{shape: [1, 8]}]", "inputs: 'missing_mod:fn'"))
    with pytest.raises(UsageError, match=r"cases\[0\] \(a\): inputs: cannot import 'missing_mod'"):
        load_manifest(path)


def test_malformed_manifest_exits_3_with_one_line(tmp_path):
    """Through the command (the loader tests above cover each field)."""
    path = _write(tmp_path, GOOD.replace("{shape: [1, 8]}", "{shape: [1, 8], dtype: complex64}"))
    done = subprocess.run([sys.executable, "-m", "hil", "lower", "--suite", str(path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 3 and len(lines) == 1, done.stderr
    assert lines[0] == (f"hil: error: {path}: cases[0] (a): inputs[0].dtype: unknown dtype "
                        "'complex64' (one of float32, float16, int64, int32, int8, uint8, bool)")


def test_a8w8_without_a_tolerance_gets_the_ops_rule_and_says_so(tmp_path):
    fp32, a8w8 = load_manifest(_write(tmp_path, GOOD + "    precision: all\n"))
    assert (fp32.tolerance.atol, fp32.atol_scale_steps, fp32.tolerance_rule) == (1e-4, 0.0, "")
    assert (a8w8.tolerance.atol, a8w8.tolerance.min_sqnr_db, a8w8.atol_scale_steps) == (1e-3, 30.0, 2.0)
    assert a8w8.tolerance_rule == "manifest default, the ops suite's A8W8 rule"
    given = load_manifest(_write(tmp_path, GOOD + "    precision: all\n    tolerance: {atol: 0.5}\n"))
    assert [(c.tolerance.atol, c.atol_scale_steps, c.tolerance_rule) for c in given] == [
        (0.5, 0.0, ""), (0.5, 0.0, "")]


def test_expectations_and_skips_reach_the_cases(tmp_path):
    extra = ("    precision: all\n    skip: 'too big'\n"
             "    expect: {verdict: FAIL_MISMATCH, reason: known, link: 'https://x/1'}\n")
    cases = load_manifest(_write(tmp_path, GOOD + extra))
    assert {(c.skip, c.expect.verdict.value, c.expect.link) for c in cases} == {
        ("too big", "FAIL_MISMATCH", "https://x/1")}
