"""Localization tests: the small residual/hardswish CNN of `tests/fixtures/localize.yaml`."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUITE = FIXTURES / "localize.yaml"
MODELS = FIXTURES / "localize_models.py"


def forward_line(text: str) -> int:
    """The line of `localize_models.py` holding `text` (where the forward calls an op)."""
    lines = MODELS.read_text().splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)


def fixture_cases(precision: str) -> list:
    """The fixture suite's cases at `precision`."""
    from hil.cases import expand_precisions, load_suite

    return expand_precisions(load_suite(str(SUITE)), precision)
