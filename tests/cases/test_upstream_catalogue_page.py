"""The upstream-catalogue page is generated from the reference file, the suites' tags and the
installed derivation: every tagged upstream test, left-out test and newer delegation
expectation is on it, the latter beside what the installed ExecuTorch keeps."""

import json

from hil.cases import load_suite
from hil.cases.ops import DELEGATION_FILE
from hil.cases.upstream_coverage import load_reference
from hil.cases.upstream_page import page as catalogue_page


def test_the_page_lists_every_upstream_test_and_newer_expectation() -> None:
    page = catalogue_page()
    tests = {t.split(":", 2)[2] for c in load_suite("ops") + load_suite("models") for t in c.tags
             if t.startswith("upstream:")}
    assert all(f"| `{test}` |" in page for test in tests)
    reference = load_reference()
    assert all(f"| `{test}` |" in page for test in reference["not_covered"])
    installed = json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))
    assert f"ExecuTorch {installed['executorch']} keeps |" in page
    assert ("| `fp32.topk_indices_k300` | `ops/test_topk.py::test_fp32_topk_indices_only` | `main` | "
            "topk not delegated | topk |") in page
    assert ("| `fp32.amax_yolo26_scores` | `models/test_yolo26_primitives.py::test_compile_primitives"
            "[operator=scores_amax]` | `main` | a delegate | nothing |") in page
    assert "| `main` |" in page and "**`prelu`**" in page and "**`amax`**" in page
