"""User manifests: cases declared in YAML, naming a module factory from the user's own code.

```yaml
suite: my_models                 # optional; default: the file's stem
cases:
  - id: tiny_mlp                 # required
    module: "my_pkg.models:make_mlp"   # required: a callable returning a torch.nn.Module
    kwargs: {hidden: 32}         # optional keyword arguments for the callable
    inputs:                      # required: one entry per forward() input
      - shape: [1, 16]
        dtype: float32           # optional (default float32)
        range: [-1.0, 1.0]       # optional (default [-1, 1])
    precision: fp32              # optional: fp32 | a8w8 | all | [fp32, a8w8] (default fp32)
    tolerance: {atol: 1.0e-4, rtol: 1.0e-4, min_sqnr_db: 40}   # optional
    expect_delegated: [linear]   # optional
    tags: [mlp]                  # optional
    seed: 0                      # optional
```

The manifest's folder is put first on `sys.path` while its modules are imported, so a
manifest can sit beside the code it names. Every error names the file, the entry and the
field, on one line.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hil.cases.case import INPUT_DTYPES, PRECISIONS, Case, InputSpec
from hil.errors import UsageError
from hil.verdict import Tolerance

_CASE_FIELDS = {
    "id", "module", "kwargs", "inputs", "precision", "tolerance", "expect_delegated", "tags",
    "seed",
}
_INPUT_FIELDS = {"shape", "dtype", "range"}
_TOLERANCE_FIELDS = {"atol", "rtol", "min_sqnr_db"}


class _Where:
    """Builds error messages that name the file, the entry and the field."""

    def __init__(self, path: Path, entry: str = "") -> None:
        self.path = path
        self.entry = entry

    def error(self, field: str, problem: str) -> UsageError:
        where = f"{self.path}: {self.entry}: " if self.entry else f"{self.path}: "
        return UsageError(f"{where}{field}: {problem}")


def load_manifest(path: Path) -> list[Case]:
    """Parse and validate a manifest; import the modules it names."""
    if not path.is_file():
        raise UsageError(f"--suite: manifest file not found: {path}")
    where = _Where(path)
    try:
        text = path.read_text(encoding="utf-8")
        root_node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: not a readable YAML manifest: {first}") from exc
    if not isinstance(data, dict):
        raise where.error("top level", "expected a mapping with a 'cases' list")
    unknown = set(data) - {"suite", "cases"}
    if unknown:
        raise where.error(sorted(unknown)[0], "unknown field (allowed: suite, cases)")
    suite = data.get("suite", path.stem)
    if not isinstance(suite, str) or not suite.strip():
        raise where.error("suite", "expected a non-empty string")
    entries = data.get("cases")
    if not isinstance(entries, list) or not entries:
        raise where.error("cases", "expected a non-empty list of cases")
    lines = _entry_lines(root_node, len(entries))
    cases: list[Case] = []
    for index, entry in enumerate(entries):
        cases.extend(_parse_case(path, suite, index, entry, lines[index]))
    return cases


def _entry_lines(root_node: yaml.Node | None, count: int) -> list[int]:
    """1-based line of each entry of `cases`, for JUnit locations."""
    if isinstance(root_node, yaml.MappingNode):
        for key, value in root_node.value:
            if key.value == "cases" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return [0] * count


def _parse_case(path: Path, suite: str, index: int, entry: Any, line: int) -> list[Case]:
    where = _Where(path, f"cases[{index}]")
    if not isinstance(entry, dict):
        raise where.error("entry", "expected a mapping")
    case_id = entry.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise where.error("id", "required, a non-empty string")
    if not case_id.isprintable() or len(case_id) > 200:
        raise where.error("id", "must be printable text of at most 200 characters")
    where = _Where(path, f"cases[{index}] ({case_id})")
    unknown = set(entry) - _CASE_FIELDS
    if unknown:
        raise where.error(sorted(unknown)[0], f"unknown field (allowed: {sorted(_CASE_FIELDS)})")
    factory = _factory(where, entry, path.parent)
    inputs = _inputs(where, entry.get("inputs"))
    precisions = _precisions(where, entry.get("precision", "fp32"))
    tolerance = _tolerance(where, entry.get("tolerance", {}))
    expect = _strings(where, "expect_delegated", entry.get("expect_delegated", []))
    tags = _strings(where, "tags", entry.get("tags", []))
    seed = entry.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise where.error("seed", f"expected an integer, got {seed!r}")
    return [
        Case(
            id=case_id,
            suite=suite,
            factory=factory,
            inputs=inputs,
            precision=precision,
            tolerance=tolerance,
            expect_delegated=expect,
            seed=seed,
            tags=tags,
            file=path.as_posix(),
            line=line,
        )
        for precision in precisions
    ]


def _factory(where: _Where, entry: dict[str, Any], folder: Path) -> Callable[[], Any]:
    spec = entry.get("module")
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise where.error("module", "required, a string 'package.module:callable'")
    module_name, attr = spec.split(":")
    kwargs = entry.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise where.error("kwargs", "expected a mapping of keyword arguments")
    sys.path.insert(0, str(folder.resolve()))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is a usage error
        raise where.error("module", f"cannot import {module_name!r}: {exc}") from exc
    finally:
        sys.path.remove(str(folder.resolve()))
    target = getattr(module, attr, None)
    if not callable(target):
        raise where.error("module", f"{module_name!r} has no callable {attr!r}")
    return functools.partial(target, **kwargs)


def _inputs(where: _Where, raw: Any) -> tuple[InputSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise where.error("inputs", "required, a non-empty list of {shape, dtype, range}")
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


def _precisions(where: _Where, raw: Any) -> tuple[str, ...]:
    if raw == "all":
        return PRECISIONS
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or any(v not in PRECISIONS for v in values):
        raise where.error("precision", f"expected fp32, a8w8, all or a list of them, got {raw!r}")
    return tuple(dict.fromkeys(values))


def _tolerance(where: _Where, raw: Any) -> Tolerance:
    if not isinstance(raw, dict):
        raise where.error("tolerance", "expected a mapping {atol, rtol, min_sqnr_db}")
    unknown = set(raw) - _TOLERANCE_FIELDS
    if unknown:
        raise where.error(f"tolerance.{sorted(unknown)[0]}", "unknown field")
    for name, value in raw.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise where.error(f"tolerance.{name}", f"expected a non-negative number, got {value!r}")
    defaults = Tolerance()
    return Tolerance(
        atol=float(raw.get("atol", defaults.atol)),
        rtol=float(raw.get("rtol", defaults.rtol)),
        min_sqnr_db=float(raw["min_sqnr_db"]) if "min_sqnr_db" in raw else None,
    )


def _strings(where: _Where, field: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise where.error(field, "expected a list of strings")
    return tuple(raw)
