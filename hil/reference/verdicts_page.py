"""docs/reference/verdicts.md: every verdict, from hil/verdict.py."""

from __future__ import annotations

import ast
import inspect

from hil import verdict
from hil.reference.markdown import NOTICE, code, table


def _docstrings() -> dict[str, str]:
    """Each Verdict member's docstring (the string literal under its assignment)."""
    body = ast.parse(inspect.getsource(verdict.Verdict)).body[0].body  # type: ignore[attr-defined]
    found = {}
    for statement, following in zip(body, body[1:], strict=False):
        if (isinstance(statement, ast.Assign) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)):
            found[statement.targets[0].id] = " ".join(following.value.value.split())  # type: ignore[attr-defined]
    return found


def _exit_effect(member: verdict.Verdict) -> str:
    code_alone = verdict.exit_code([member])
    return {verdict.EXIT_OK: "none (0)", verdict.EXIT_FAILED: "1",
            verdict.EXIT_INFRA: "2 (unless a test failed: 1)"}[code_alone]


def verdicts_page() -> str:
    """The page."""
    docs = _docstrings()
    rows = [(code(member.value), docs.get(member.name, ""),
             member.junit_element and f"`<{member.junit_element}>`" or "passed",
             "yes (on another board when there is one)" if member.retried else "no",
             _exit_effect(member))
            for member in verdict.Verdict]
    expectable = ", ".join(code(v.value) for v in verdict.EXPECTABLE)
    return (f"# Verdicts\n\n{NOTICE}\nEvery case ends with one verdict (`hil/verdict.py`): what "
            "it means, its JUnit element, whether it is retried, and its effect on the exit code "
            "of `hil run` (the worst wins: a test failure `1` over an error `2`).\n\n"
            + table(("verdict", "meaning", "JUnit", "retried", "exit code"), rows)
            + f"\nA case may declare a known failure (`expect:` in a manifest) with one of "
            f"{expectable}: ending with it is `XFAIL`, passing is `XPASS`.\n\n"
            "A case passes when `|out - ref| <= atol + rtol * |ref|` for every element of every "
            "output (and its SQNR >= `min_sqnr_db` when set); the comparison reports per output "
            "the max abs and rel error, MAE, SQNR and cosine similarity.\n")
