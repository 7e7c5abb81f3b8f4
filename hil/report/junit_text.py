"""A `<testcase>` as text, written directly: the bytes junit-xml's pretty-printed document has
for it (junit_xml/__init__.py: `TestSuite.build_xml_doc`, then `to_xml_report_string`:
ElementTree, `_clean_illegal_xml_chars`, minidom's `toprettyxml` with tabs), without building
and parsing two XML trees per case (most of hil's cost of recording a case).

What that chain does to a value, and so what this does: ElementTree writes the document in
ASCII (every other character as a reference), junit-xml's cleaning then drops the ASCII
characters XML forbids (its list's others are references by then: they stay), the parser
turns the references back, and minidom escapes `&`, `<`, `"` and `>` (Python 3.11's
`_write_data`) in text and attributes alike, writes an element whose only child is text on
one line and an element without children as `<tag .../>`. In an attribute a CR survives
(ElementTree writes it as a reference); in text it is dropped. A lone surrogate, U+FFFE or
U+FFFF made that chain fail (the parser rejects their references): here they are dropped.
"""

from __future__ import annotations

import re
from typing import Any

from junit_xml import TestCase

_DROPPED_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
_DROPPED_IN_ATTRIBUTES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace(">", "&gt;")


def _attribute(value: Any) -> str:
    return _escape(_DROPPED_IN_ATTRIBUTES.sub("", str(value)))


def _open(tag: str, attributes: dict[str, Any], indent: str) -> str:
    """`<tag a="v"...` (not closed)."""
    pairs = "".join(f' {name}="{_attribute(value)}"' for name, value in attributes.items())
    return f"{indent}<{tag}{pairs}"


def _element(tag: str, attributes: dict[str, Any], text: Any, indent: str) -> str:
    """`<tag a="v"...>text</tag>` (or `<tag .../>` when the text is empty once cleaned)."""
    head = _open(tag, attributes, indent)
    body = _DROPPED_IN_TEXT.sub("", str(text)) if text else ""
    return f"{head}>{_escape(body)}</{tag}>\n" if body else head + "/>\n"


def xml_of_testcase(case: TestCase, indent: str = "\t\t") -> str:
    """`case` as junit-xml pretty-prints it at `indent` (a testcase of a testsuite: two tabs),
    for the fields hil sets: name, time, classname, file, line, failures, errors, skipped,
    system-out and system-err."""
    attributes: dict[str, Any] = {"name": case.name}
    if case.elapsed_sec:
        attributes["time"] = "%f" % case.elapsed_sec  # noqa: UP031 - junit-xml's own formatting
    for name, value in (("classname", case.classname), ("file", case.file), ("line", case.line)):
        if value:
            attributes[name] = value
    inner = indent + "\t"
    children = []
    for kind, entries in (("failure", case.failures), ("error", case.errors)):
        for entry in entries:
            if entry["output"] or entry["message"]:
                children.append(_element(kind, _typed(kind, entry), entry["output"], inner))
    for entry in case.skipped:
        skipped = _typed("skipped", {**entry, "type": None})
        children.append(_element("skipped", skipped, entry["output"], inner))
    for tag, text in (("system-out", case.stdout), ("system-err", case.stderr)):
        if text:
            children.append(_element(tag, {}, text, inner))
    head = _open("testcase", attributes, indent)
    if not children:
        return head + "/>\n"
    return head + ">\n" + "".join(children) + indent + "</testcase>\n"


def _typed(kind: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A failure's, error's or skip's attributes in junit-xml's order: type, message."""
    attributes: dict[str, Any] = {"type": kind}
    if entry["message"]:
        attributes["message"] = entry["message"]
    if entry.get("type"):
        attributes["type"] = entry["type"]
    return attributes
