"""User manifests: cases declared in YAML, naming a module factory from the user's own code.

```yaml
suite: my_models                 # optional; default: the file's stem
latency: {warmup: 3, iterations: 20}   # optional: hil/latency_plan.py
cases:
  - id: tiny_mlp                 # required
    module: "my_pkg.models:make_mlp"   # required: a callable returning a torch.nn.Module
    kwargs: {hidden: 32}         # optional keyword arguments for the callable
    inputs:                      # required: one entry per forward() input
      - shape: [1, 16]
        dtype: float32           # optional (default float32)
        range: [-1.0, 1.0]       # optional (default [-1, 1])
    precision: fp32              # optional: fp32 | a8w8 | all | [fp32, a8w8] (default fp32)
    tolerance: {atol: 1.0e-4, rtol: 1.0e-4, min_sqnr_db: 40, scale_steps: 2}   # optional
    expect_delegated: [linear]   # optional
    require_delegation: false    # optional: on flow enn, undelegated expected ops fail the case
    tags: [mlp]                  # optional
    seed: 0                      # optional
    dataset: {kind: image_folder, root: images/, size: 224, count: 16}   # optional
    checker: {name: classifier, topk: {1: 0.9, 3: 0.95}}                 # optional
    calibration: "my_pkg.data:calibration"   # optional: () -> list of input tuples
    expect: {verdict: FAIL_MISMATCH, reason: "...", link: "https://..."}  # optional: known failure
    skip: "why it is not run"    # optional: SKIP without lowering or running
```

`inputs` may instead name a function, `inputs: "my_pkg.data:make_inputs"`, called with the
case's seed and returning a tensor or a tuple of tensors; with a `dataset`, `inputs` may be
left out (the dataset's batch is the input). `scale_steps` (A8W8) adds that many steps of
the output's quantization scale to `atol`. Without a `tolerance`, fp32 gets atol/rtol 1e-4
and A8W8 the ops suite's rule (1e-3 + 2 quantization steps, SQNR >= 30 dB); a given
`tolerance` holds for every precision. A dataset `root` is relative to the manifest.

A manifest is code: its `module:`, `inputs:` and `calibration:` callables are imported and
run with the rights of whoever runs hil, like a `conftest.py`.

The manifest's folder is put first on `sys.path` while its modules are imported (and stays
on it, last, so lowering workers can import them too), so a manifest can sit beside the
code it names. Every error names the file, the entry and the field, on one line.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hil.cases.case import A8W8_RULE, A8W8_RULE_STEPS, INPUT_DTYPES, PRECISIONS, Case, InputSpec
from hil.cases.manifest_fields import CASE_FIELDS, INPUT_FIELDS, TOLERANCE_FIELDS, TOP_FIELDS
from hil.document import item_lines, load_document
from hil.errors import UsageError, Where
from hil.expectation import parse_expectation, parse_skip
from hil.fields import names
from hil.verdict import Tolerance

_TOP_FIELDS = names(TOP_FIELDS)
_CASE_FIELDS = names(CASE_FIELDS)
_INPUT_FIELDS = names(INPUT_FIELDS)
MANIFEST_A8W8_DEFAULT = "manifest default, the ops suite's A8W8 rule"
"""How a case without a `tolerance` says where its A8W8 tolerance came from (`atol_rule`)."""
_TOLERANCE_FIELDS = names(TOLERANCE_FIELDS)


def load_manifest(path: Path) -> list[Case]:
    """Parse and validate a manifest; import the modules it names."""
    if not path.is_file():
        raise UsageError(f"--suite: manifest file not found: {path}")
    where = Where(path)
    try:
        text = path.read_text(encoding="utf-8")
        lines, data = item_lines(text, "cases"), load_document(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: not a readable YAML manifest: {first}") from exc
    if not isinstance(data, dict):
        raise where.error("top level", "expected a mapping with a 'cases' list")
    unknown = set(data) - _TOP_FIELDS  # latency: hil/latency_plan.py
    if unknown:
        allowed = ", ".join(f.name for f in TOP_FIELDS)
        raise where.error(sorted(unknown)[0], f"unknown field (allowed: {allowed})")
    suite = data.get("suite", path.stem)
    if not isinstance(suite, str) or not suite.strip():
        raise where.error("suite", "expected a non-empty string")
    entries = data.get("cases")
    if not isinstance(entries, list) or not entries:
        raise where.error("cases", "expected a non-empty list of cases")
    if len(lines) != len(entries):
        lines = [0] * len(entries)
    cases: list[Case] = []
    for index, entry in enumerate(entries):
        cases.extend(_parse_case(path, suite, index, entry, lines[index]))
    return cases


def _parse_case(path: Path, suite: str, index: int, entry: Any, line: int) -> list[Case]:
    where = Where(path, f"cases[{index}]")
    if not isinstance(entry, dict):
        raise where.error("entry", "expected a mapping")
    case_id = entry.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise where.error("id", "required, a non-empty string")
    if not case_id.isprintable() or len(case_id) > 200:
        raise where.error("id", "must be printable text of at most 200 characters")
    where = Where(path, f"cases[{index}] ({case_id})")
    unknown = set(entry) - _CASE_FIELDS
    if unknown:
        raise where.error(sorted(unknown)[0], f"unknown field (allowed: {sorted(_CASE_FIELDS)})")
    kwargs = entry.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise where.error("kwargs", "expected a mapping of keyword arguments")
    factory = functools.partial(_callable(where, "module", entry.get("module"), path.parent), **kwargs)
    dataset = _dataset(where, entry.get("dataset"), path.parent) if "dataset" in entry else None
    input_fn = None
    if isinstance(entry.get("inputs"), str):
        input_fn = _callable(where, "inputs", entry["inputs"], path.parent)
        inputs: tuple[InputSpec, ...] = ()
    elif dataset is not None and "inputs" not in entry:
        inputs = ()
    else:
        inputs = _inputs(where, entry.get("inputs"))
    precisions = _precisions(where, entry.get("precision", "fp32"))
    tolerance, steps = _tolerance(where, entry.get("tolerance", {}))
    given = "tolerance" in entry
    delegated = _strings(where, "expect_delegated", entry.get("expect_delegated", []))
    tags = _strings(where, "tags", entry.get("tags", []))
    seed = entry.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise where.error("seed", f"expected an integer, got {seed!r}")
    require = entry.get("require_delegation", False)
    if not isinstance(require, bool):
        raise where.error("require_delegation", f"expected true or false, got {require!r}")
    checker = _checker(where, entry["checker"]) if "checker" in entry else None
    calibration = (
        _callable(where, "calibration", entry["calibration"], path.parent)
        if "calibration" in entry else None
    )
    try:
        expect = parse_expectation(entry["expect"]) if "expect" in entry else None
    except ValueError as exc:
        raise where.error("expect", str(exc)) from None
    try:
        skip = parse_skip(entry["skip"]) if "skip" in entry else ""
    except ValueError as exc:
        raise where.error("skip", str(exc)) from None
    return [
        Case(
            id=case_id,
            suite=suite,
            factory=factory,
            inputs=inputs,
            precision=precision,
            tolerance=A8W8_RULE if precision == "a8w8" and not given else tolerance,
            expect_delegated=delegated,
            seed=seed,
            tags=tags,
            file=path.as_posix(),
            line=line,
            input_fn=input_fn,
            dataset=dataset,
            checker=checker,
            calibration=calibration,
            atol_scale_steps=A8W8_RULE_STEPS if precision == "a8w8" and not given else steps,
            tolerance_rule=MANIFEST_A8W8_DEFAULT if precision == "a8w8" and not given else "",
            require_delegation=require,
            expect=expect,
            skip=skip,
        )
        for precision in precisions
    ]


def _callable(where: Where, field: str, spec: Any, folder: Path) -> Callable[..., Any]:
    """Import `package.module:name` with the manifest's folder first on sys.path (it stays on
    sys.path, last, so lowering worker processes can import the module too)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise where.error(field, "required, a string 'package.module:callable'")
    module_name, attr = spec.split(":")
    entry = str(folder.resolve())
    sys.path.insert(0, entry)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is a usage error
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise where.error(field, f"cannot import {module_name!r}: {first}") from exc
    finally:
        sys.path.remove(entry)
        if entry not in sys.path:
            sys.path.append(entry)
    target = getattr(module, attr, None)
    if not callable(target):
        raise where.error(field, f"{module_name!r} has no callable {attr!r}")
    return target


def _dataset(where: Where, raw: Any, folder: Path) -> Any:
    from hil.cases.datasets import make_dataset

    if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str):
        raise where.error("dataset", "expected a mapping with a 'kind' (e.g. image_folder)")
    params = {k: v for k, v in raw.items() if k != "kind"}
    if isinstance(params.get("root"), str):
        params["root"] = str((folder / params["root"]).resolve())
    try:
        return make_dataset(raw["kind"], params)
    except (ValueError, OSError) as exc:
        raise where.error("dataset", str(exc)) from None


def _checker(where: Where, raw: Any) -> Any:
    from hil.checkers import checker_spec

    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise where.error("checker", "expected a checker name or a mapping with 'name'")
    try:
        return checker_spec(raw["name"], {k: v for k, v in raw.items() if k != "name"})
    except ValueError as exc:
        raise where.error("checker", str(exc)) from None


def _inputs(where: Where, raw: Any) -> tuple[InputSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise where.error(
            "inputs", "required, a non-empty list of {shape, dtype, range} or 'package.module:fn'"
        )
    specs = []
    for i, item in enumerate(raw):
        field = f"inputs[{i}]"
        if not isinstance(item, dict):
            raise where.error(field, "expected a mapping with 'shape'")
        unknown = set(item) - _INPUT_FIELDS
        if unknown:
            raise where.error(f"{field}.{sorted(unknown)[0]}", "unknown field")
        shape = item.get("shape")
        if (
            not isinstance(shape, list)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
        ):
            raise where.error(f"{field}.shape", f"expected a list of positive integers, got {shape!r}")
        dtype = item.get("dtype", "float32")
        if dtype not in INPUT_DTYPES:
            raise where.error(
                f"{field}.dtype", f"unknown dtype {dtype!r} (one of {', '.join(INPUT_DTYPES)})"
            )
        bounds = item.get("range", [-1.0, 1.0])
        if (
            not isinstance(bounds, list)
            or len(bounds) != 2
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            or not bounds[0] < bounds[1]
        ):
            raise where.error(f"{field}.range", f"expected [low, high] with low < high, got {bounds!r}")
        specs.append(InputSpec(tuple(shape), dtype, float(bounds[0]), float(bounds[1])))
    return tuple(specs)


def _precisions(where: Where, raw: Any) -> tuple[str, ...]:
    if raw == "all":
        return PRECISIONS
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or any(v not in PRECISIONS for v in values):
        raise where.error("precision", f"expected fp32, a8w8, all or a list of them, got {raw!r}")
    return tuple(dict.fromkeys(values))


def _tolerance(where: Where, raw: Any) -> tuple[Tolerance, float]:
    if not isinstance(raw, dict):
        raise where.error("tolerance", "expected a mapping {atol, rtol, min_sqnr_db, scale_steps}")
    unknown = set(raw) - _TOLERANCE_FIELDS
    if unknown:
        raise where.error(f"tolerance.{sorted(unknown)[0]}", "unknown field")
    for name, value in raw.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise where.error(f"tolerance.{name}", f"expected a non-negative number, got {value!r}")
    defaults = Tolerance()
    tolerance = Tolerance(
        atol=float(raw.get("atol", defaults.atol)),
        rtol=float(raw.get("rtol", defaults.rtol)),
        min_sqnr_db=float(raw["min_sqnr_db"]) if "min_sqnr_db" in raw else None,
    )
    return tolerance, float(raw.get("scale_steps", 0.0))


def _strings(where: Where, field: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise where.error(field, "expected a list of strings")
    return tuple(raw)
