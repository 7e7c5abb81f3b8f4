"""What a run asks of a labgrid lab: places by tags (or by name), how many. Plain records, no
labgrid import; the source that reserves them is hil/pool/labgrid.py.

```
--board 'labgrid:soc=e9955*2'          two places tagged soc=e9955
--board labgrid:soc=e9955,runner_profile=hil
--board labgrid:place=lab1-a            the place named lab1-a
inventory:  - {name: lab1-a, labgrid: {place: lab1-a}}
            - {name: any-e9955, labgrid: {tags: {soc: e9955}, count: 2}}
```

A place's name is a tag the coordinator matches as any other (`name=...`, labgrid's
`schedule_reservations`), so `place=NAME` is the filter `name=NAME`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hil.board.images import Provisioning
from hil.errors import UsageError

PREFIX = "labgrid:"
MAX_COUNT = 64
TAG_KEY = re.compile(r"^[a-z][a-z0-9_]+$")
"""labgrid's TAG_KEY (remote/common.py), anchored."""
TAG_VALUE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""Values hil accepts: what labgrid's coordinator stores without surprise, and no separator of
the spec (`,` `=` `*`)."""


@dataclass(frozen=True)
class LabgridRequest:
    """Places a run wants: `count` places whose tags include every pair of `tags`."""

    label: str
    """How the user wrote it (the `--board` value or the inventory entry's name): messages."""
    tags: tuple[tuple[str, str], ...]
    """The reservation's filter; `("name", PLACE)` asks for one place by name."""
    count: int = 1
    chipset: str | None = None
    """An inventory entry's chipset (wins over the place's tags)."""
    runner_profile: str | None = None
    """An inventory entry's runner profile (wins over the place's tags)."""
    provisioning: Provisioning | None = None
    """An inventory entry's images and build; the fastboot endpoint is the place's."""

    def describe(self) -> str:
        filt = ",".join(f"{k}={v}" for k, v in self.tags)
        return f"{filt}*{self.count}" if self.count != 1 else filt


def is_labgrid_spec(text: str) -> bool:
    return text.startswith(PREFIX)


def check_tags(tags: dict[str, str], where: str) -> tuple[tuple[str, str], ...]:
    """The filter as sorted pairs; UsageError naming `where` for a bad key or value."""
    if not tags:
        raise UsageError(f"{where}: name at least one tag (KEY=VALUE) or place=NAME")
    for key, value in tags.items():
        if not isinstance(key, str) or not TAG_KEY.match(key):
            raise UsageError(f"{where}: tag key {key!r}: lower-case letters, digits and '_', "
                             "starting with a letter (labgrid's rule)")
        if not isinstance(value, str) or not TAG_VALUE.match(value):
            raise UsageError(f"{where}: tag {key}: value {value!r}: letters, digits, '.', '_', '-'")
    return tuple(sorted(tags.items()))


def parse_labgrid_spec(text: str) -> LabgridRequest:
    """`labgrid:KEY=VALUE[,KEY=VALUE...][*N]`; `place=NAME` is the tag `name=NAME`."""
    where = f"--board {text!r}"
    body = text[len(PREFIX):] if is_labgrid_spec(text) else text
    body, star, count_text = body.partition("*")
    count = 1
    if star:
        if not count_text.isdigit() or not 1 <= int(count_text) <= MAX_COUNT:
            raise UsageError(f"{where}: *N: expected 1 <= N <= {MAX_COUNT}")
        count = int(count_text)
    tags: dict[str, str] = {}
    for pair in filter(None, body.split(",")):
        key, eq, value = pair.partition("=")
        if not eq:
            raise UsageError(f"{where}: {pair!r} is not KEY=VALUE")
        key = "name" if key == "place" else key
        if key in tags:
            raise UsageError(f"{where}: {key} given twice")
        tags[key] = value
    if "name" in tags and count != 1:
        raise UsageError(f"{where}: place=NAME names one place: drop *{count}")
    return LabgridRequest(label=text, tags=check_tags(tags, where), count=count)
