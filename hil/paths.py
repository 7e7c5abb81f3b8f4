"""Names of the files and folders hil writes.

`actions/upload-artifact` refuses a path that holds any of `" : < > | * ?` (and a carriage
return or line feed), so an upload of `hil-out/` would fail for every network board
(`127.0.0.1:5555`). Every name hil derives from data (a board's name, a case id, an adb
address) goes through `safe_name` before it becomes part of a path.
"""

from __future__ import annotations

import re

FORBIDDEN = '":<>|*?\r\n'
"""Characters `actions/upload-artifact` refuses in a path (Windows' too)."""
_UNSAFE = re.compile(r'[":<>|*?\r\n\\/\x00-\x1f]')


def safe_name(name: str) -> str:
    """`name` as one path component: every forbidden character, slash and control character
    becomes `_` (`127.0.0.1:5555` -> `127.0.0.1_5555`); `.`/`..` and empty names too."""
    safe = _UNSAFE.sub("_", name)
    return safe if safe.strip(".") else safe.replace(".", "_") or "_"
