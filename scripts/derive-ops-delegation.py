#!/usr/bin/env python3
"""Write hil/cases/ops_delegation.json: per ops case and precision, the ops ExecuTorch's ENN
partitioner keeps (hil.lower.enn_partition.case_delegation), from the installed executorch.

Run it after changing an ops case, the partitioner mirror or the quantization (the sources in
hil.lower.enn_partition.DELEGATION_INPUTS) or upgrading executorch or torch: CI fails while
the stored `inputs_sha256` and those inputs differ (tests/cases/test_ops_delegation.py),
and `./scripts/test --full` while the file and a fresh derivation of every case differ.
About 80 s on 2 quiet cores."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hil.cases.ops import DELEGATION_FILE, cases  # noqa: E402
from hil.lower.enn_partition import case_delegation, delegation_inputs_digest  # noqa: E402


def _derive(case: object) -> list[str] | None:
    """The kept ops, or None when the case does not get to an edge graph (its known failure,
    e.g. FAIL_QUANTIZE) or is skipped (not lowered)."""
    if case.skip:
        return None
    try:
        return list(case_delegation(case))
    except Exception as exc:  # noqa: BLE001 - reported, and the case says why it fails
        print(f"{case.key}: no edge graph: {type(exc).__name__}: {exc}"[:300])
        return None


def main() -> int:
    table = {f"{case.precision}.{case.id}": _derive(case) for case in cases()}
    document = {
        "about": "ops the ENN partitioner keeps per ops case (scripts/derive-ops-delegation.py)",
        "executorch": version("executorch"),
        "torch": version("torch"),
        "inputs_sha256": delegation_inputs_digest(),
        "cases": dict(sorted(table.items())),
    }
    DELEGATION_FILE.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(table)} cases to {DELEGATION_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
