"""docs/reference/results-json.md: results.json's fields from its JSON Schema
(hil/report/results.schema.json, the one source), between the hand-written prose of
hil/reference/results_prose.py."""

from __future__ import annotations

from typing import Any

from hil.reference.markdown import NOTICE, code, table
from hil.reference.results_prose import AFTER, BEFORE
from hil.report.schema import load_schema


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(the `$defs` name, the schema) of a `$ref`, else (None, node)."""
    ref = node.get("$ref")
    if ref is None:
        return None, node
    target: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return ref.rsplit("/", 1)[-1], target


def _nullable(node: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether `node` allows null, and the schema without the null."""
    if "anyOf" in node:
        others = [n for n in node["anyOf"] if n.get("type") != "null"]
        return len(others) < len(node["anyOf"]), {**others[0], **({"description": node["description"]}
                                                                   if "description" in node else {})}
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [k for k in kind if k != "null"]
        return True, {**node, "type": rest[0] if len(rest) == 1 else rest}
    if "enum" in node and None in node["enum"]:
        return True, {**node, "enum": [v for v in node["enum"] if v is not None]}
    return False, node


Nested = list[tuple[str, dict[str, Any]]]
"""Objects still to document: (their path, their schema)."""


def _kind(schema: dict[str, Any], node: dict[str, Any], path: str,
          placed: dict[str, str]) -> tuple[str, Nested]:
    """What a field takes, as the table shows it, and the nested objects to document next
    (`placed`: the path where each `$defs` object is documented, so it is documented once)."""
    nullable, node = _nullable(node)
    name, target = _resolve(schema, node)
    nested: Nested = []
    if name is not None and name in placed and target.get("type") == "object":
        where = placed[name]
        return f"object ([`{where}`](#{_anchor(where)}))" + (" or null" if nullable else ""), []
    if name is not None and target.get("type") == "object" and "properties" in target:
        placed[name] = path
    if "const" in target:
        text = code(str(target["const"]))
    elif "enum" in target:
        text = " ".join(code(str(v)) for v in target["enum"])
    elif target.get("type") == "array":
        inner, nested = _kind(schema, target.get("items", {}), path + "[]", placed)
        text = f"list of {inner}"
    elif target.get("type") == "object" and "properties" in target:
        text = f"object ([`{path}`](#{_anchor(path)}))"
        nested = [(path, target)]
    elif target.get("type") == "object":
        values = target.get("additionalProperties")
        inner, nested = ("anything", [])
        if isinstance(values, dict) and values:
            inner, nested = _kind(schema, values, path, placed)
        text = f"mapping of {inner}"
    else:
        text = str(target.get("type", "anything"))
    if name == "verdict":
        text = "a verdict ([verdicts](verdicts.md))"
    return text + (" or null" if nullable else ""), nested


def _anchor(path: str) -> str:
    return "".join(c for c in path.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def _sections(schema: dict[str, Any], path: str, node: dict[str, Any], seen: set[str],
              placed: dict[str, str]) -> list[str]:
    if path in seen:
        return []
    seen.add(path)
    rows, later = [], []
    required = set(node.get("required", ()))
    for field, sub in node["properties"].items():
        child = f"{path}.{field}" if path else field
        text, nested = _kind(schema, sub, child, placed)
        _, plain = _nullable(sub)
        description = sub.get("description") or _resolve(schema, plain)[1].get("description", "")
        rows.append((code(field), text + (" (required)" if field in required else ""), description))
        later += nested
    heading = f"## {path}\n\n{' '.join(node.get('description', '').split())}\n\n" if path else ""
    out = [heading + table(("field", "takes", "meaning"), rows)]
    for child, target in later:
        out += _sections(schema, child, target, seen, placed)
    return out


def results_page() -> str:
    """The page."""
    schema = load_schema()
    body = "\n".join(_sections(schema, "", schema, set(), {}))
    return (f"# results.json\n\n{NOTICE}\n{BEFORE}\n## The document\n\n"
            f"{' '.join(schema['description'].split())}\n\n{body}\n{AFTER}")
