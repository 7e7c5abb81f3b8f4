"""Jenkins' JUnit schema (tests/fixtures/junit-10.xsd, MIT, vendored) against hil's JUnit files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

XSD = Path(__file__).resolve().parent / "fixtures" / "junit-10.xsd"


def assert_valid_junit(path: Path) -> None:
    """The file validates against Jenkins' schema, minus junit-xml's known extensions
    (`disabled` on suites, `file`/`line` on test cases)."""
    tree = ET.parse(path)
    for element in tree.iter():
        element.attrib.pop("disabled", None)
        if element.tag == "testcase":
            element.attrib.pop("file", None)
            element.attrib.pop("line", None)
    xmlschema.XMLSchema(str(XSD)).validate(ET.tostring(tree.getroot(), encoding="unicode"))
