"""Reading a YAML document (a suite manifest) without PyYAML's pure-Python cost.

PyYAML's pure-Python loader builds a node per scalar before the data: a 20,000-case manifest
took 38 s and a 490 MB peak, and `hil run` read it three times (the cases, their lines, the
`latency:` block). Here a document that is JSON (which is YAML; generated suites usually
are) is read by Python's json, any other by libyaml's safe loader where PyYAML has it, and
the lines of a sequence's items come from libyaml's parser events, without a tree.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it, else the pure-Python one."""


def yaml_error_line(path: Any, exc: BaseException) -> str:
    """One line for a document that cannot be read: `FILE: line 4, column 22: expected ',' or
    ']', but got '}'` from PyYAML's mark and problem; the first line of anything else."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"{path}: line {mark.line + 1}, column {mark.column + 1}: {problem}"
    text = str(exc).strip()
    return f"{path}: {text.splitlines()[0] if text else type(exc).__name__}"


def load_document(text: str) -> Any:
    """The data of a YAML document; yaml.YAMLError when it is not one. JSON is read by json:
    YAML 1.1 reads JSON's `1e-3` as a string, json as the number JSON means."""
    try:
        return json.loads(text)
    except ValueError:
        return yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader


def item_lines(text: str, key: str) -> list[int]:
    """The 1-based line of each item of the sequence under `key` in the document's
    top-level mapping, from the parser's events; empty when there is no such sequence.
    yaml.YAMLError when the text is not YAML."""
    lines: list[int] = []
    stack: list[list[Any]] = []  # each open container: [is mapping, key expected, key, is it]
    for event in yaml.parse(text, Loader=LOADER):
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            continue
        if not isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent,
                                  yaml.SequenceStartEvent)):
            continue
        parent = stack[-1] if stack else None
        wanted = False
        if parent is not None and parent[0]:  # in a mapping: a key, then its value
            if parent[1]:
                parent[1], parent[2] = False, getattr(event, "value", None)
                if not isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                    continue
            else:
                parent[1] = True
                wanted = len(stack) == 1 and parent[2] == key
        elif parent is not None and parent[3]:
            lines.append(event.start_mark.line + 1)
        if isinstance(event, yaml.MappingStartEvent):
            stack.append([True, True, None, False])
        elif isinstance(event, yaml.SequenceStartEvent):
            stack.append([False, False, None, wanted])
    return lines
