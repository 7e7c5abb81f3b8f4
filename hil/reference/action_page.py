"""docs/reference/action.md: the inputs and outputs of action.yml."""

from __future__ import annotations

from pathlib import Path

import yaml

from hil.reference.markdown import NOTICE, code, table


def action_page(path: Path) -> str:
    """The page for the action defined in `path`."""
    action = yaml.safe_load(path.read_text(encoding="utf-8"))
    inputs = [(code(name), "yes" if spec.get("required") else "no",
               code(str(spec["default"])) if str(spec.get("default", "")) else "`\"\"`",
               spec.get("description", ""))
              for name, spec in action.get("inputs", {}).items()]
    outputs = [(code(name), spec.get("description", "")) for name, spec in action.get("outputs", {}).items()]
    return (f"# The action: inputs and outputs\n\n{NOTICE}\n**{action['name']}**: "
            f"{' '.join(action['description'].split())}\n\n"
            "Every input is a string, as GitHub passes it; `\"\"` means empty (not set).\n\n"
            "## Inputs\n\n" + table(("input", "required", "default", "description"), inputs)
            + "\n## Outputs\n\n" + table(("output", "description"), outputs))
