"""Delegation expectations belong to an ExecuTorch version. The installed version's are what
its partitioner keeps of each case (hil/cases/ops_delegation.json, pinned by
tests/cases/test_ops_delegation.py). What a newer version's tests state that the installed one
does not do is recorded as that version's in hil/cases/upstream_reference.json (`delegation`;
scripts/upstream-coverage.py asks for it against a newer checkout). Here each recorded
statement is checked against the installed partitioner, derived afresh: on ExecuTorch 1.5.1,
main's "topk stays outside the delegate" (the k=300 cases among them) and "the amax
primitive is delegated" are each reported as not yet in the installed version — not passed,
not failed. An upgrade that makes one hold fails here, naming it."""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib.metadata import version

import pytest

from hil.cases import load_suite
from hil.cases.ops import DELEGATION_FILE
from hil.cases.upstream_coverage import load_reference, satisfied
from hil.lower.enn_partition import case_program, edge_nodes, expected_delegation, short_name

pytestmark = pytest.mark.slow  # derives the dozen recorded cases afresh (~20 s)

INSTALLED = version("executorch").split("+")[0]
RECORDED = [(v, entry) for v, entries in sorted(load_reference()["delegation"].items()) for entry in entries]
NOT_YET = "not yet in the installed version"


@functools.cache
def _cases() -> dict:
    return {f"{c.precision}.{c.id}": c for c in load_suite("ops")}


@functools.cache
def _derived(key: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """(what the installed partitioner keeps of the case, every op of its edge graph)."""
    program = case_program(_cases()[key])
    seen, _ = edge_nodes(program, None)
    return expected_delegation(program), frozenset(short_name(name) for name in seen)


def _status(entry: dict) -> str:
    kept, edge = _derived(entry["case"])
    fresh = dataclasses.replace(_cases()[entry["case"]], expect_delegated=kept)
    holds = satisfied((entry["states"], entry["delegated"]), fresh, lambda: set(edge))
    return {True: "holds", False: NOT_YET, None: "says nothing about the case"}[holds]


def _said(entry: dict) -> str:
    if entry["states"] == "delegate":
        return "has a delegate" if entry["delegated"] else "has no delegate"
    return f"{entry['states'].removeprefix('op:')} {'ends in' if entry['delegated'] else 'stays outside'} the delegate"


def test_each_newer_versions_expectation_is_checked_against_the_installed_partitioner() -> None:
    assert RECORDED and all(v != INSTALLED for v, _ in RECORDED), "the installed version's are derived, not recorded"
    lines = [f"{entry['case']}: ExecuTorch {v} ({entry['test']}): {_said(entry)}; installed {INSTALLED}: "
             f"{_status(entry)}" for v, entry in RECORDED]
    print("\n".join(lines))
    holding = [line for line in lines if not line.endswith(NOT_YET)]
    assert not holding, ("recorded expectations the installed partitioner satisfies now: drop them from "
                         "hil/cases/upstream_reference.json (delegation):\n" + "\n".join(holding))


def test_topk_k300_and_amax_expectations_per_version() -> None:
    """main: the k=300 topk cases keep topk (and everything) off the NPU, the amax primitive is
    delegated; the installed 1.5.1 derivation delegates topk and keeps nothing of amax."""
    recorded = {(e["case"], e["states"]): e["delegated"] for v, e in RECORDED if v == "main"}
    for case in ("fp32.topk_indices_k300", "fp32.topk_values_k300", "fp32.topk_yolo26_both"):
        assert recorded[(case, "op:topk")] is False and recorded[(case, "delegate")] is False
    assert recorded[("fp32.amax_yolo26_scores", "delegate")] is True
    stored = json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))
    assert stored["executorch"] == INSTALLED == "1.5.1"
    assert stored["cases"]["fp32.topk_indices_k300"] == ["topk"] == list(_derived("fp32.topk_indices_k300")[0])
    assert stored["cases"]["fp32.amax_yolo26_scores"] == [] == list(_derived("fp32.amax_yolo26_scores")[0])
