"""The fields of an inventory (hil/board/inventory.py and hil/board/images.py validate them,
docs/reference/inventory.md is generated from them): one documented table per mapping."""

from __future__ import annotations

from hil.fields import Field, names

BOARD_FIELDS = (
    Field("name", "string", "unique; letters, digits, `.`, `_` and `-` (at most 64): the "
          "board's name in results, logs and `--board`", required=True),
    Field("adb", "string", "its adb serial (USB) or `HOST:PORT` (network adb); an entry has "
          "either `adb` or `labgrid`", required=True),
    Field("adb_server", "`HOST:PORT` or `localfilesystem:/PATH`", "the lab's adb server that "
          "owns the board; hil uses it as a client only",
          default="--adb-server, else the host's server (USB) or a private one (HOST:PORT)"),
    Field("chipset", "E9955 or E9965", "what the board's getprop must report; a board of "
          "another chipset than the run's `--chipset` is left out", required=True),
    Field("console", "string", "its UART: a device path (`/dev/ttyUSB0`), `socket://HOST:PORT` "
          "or `rfc2217://HOST:PORT`", default="none"),
    Field("console_baud", "integer > 0", "the UART's baud rate", default="115200"),
    Field("power", "mapping", "power control: commands `{on, off, cycle, bootloader}` or a "
          "USB serial relay `{relay, channel, baud, inverted}` (below); without it the "
          "recovery ladder stops at reboot", default="none"),
    Field("tags", "list of strings", "free labels", default="[]"),
    Field("runner_profile", "upstream or hil", "what its enn_executor_runner can execute",
          default="learnt: the runner's .profile.json, else upstream"),
    Field("images", "mapping PARTITION: FILE or {file, sha256}", "its known-good images, "
          "relative to the inventory file; `hil flash` and `hil run --provision` flash them "
          "(needs product, fastboot and expected_build)"),
    Field("flash_order", "list of partitions", "these first, then the rest in `images` order",
          default="the order of `images`"),
    Field("expected_build", "{PROPERTY: VALUE}", "the build the board must report, e.g. "
          "`{ro.build.fingerprint: ...}`; alone (no images) it is only checked and recorded"),
    Field("product", "string", "what `fastboot getvar product` must say: a flash is refused on "
          "another product"),
    Field("fastboot", "USB serial or `tcp:HOST:PORT`", "where the board's bootloader answers "
          "fastboot"),
    Field("labgrid", "mapping", "instead of `adb`: a place of the labgrid coordinator "
          "(`hil run --labgrid`), `{place: NAME}` or `{tags: {KEY: VALUE}, count: N}` (below); "
          "adb, console and power then come from the place's resources"),
)
LABGRID_ENTRY_FIELDS = frozenset({"name", "labgrid", "chipset", "runner_profile", "tags",
                                  "images", "flash_order", "expected_build", "product"})
"""The fields an entry with `labgrid` may have (the place's exporter says the rest)."""
ADB_ENTRY_FIELDS = names(BOARD_FIELDS) - {"labgrid"}
"""The fields an entry with `adb` may have."""
POWER_COMMAND_FIELDS = (
    Field("on", "command", "switch the board on: a list of arguments, or one string split "
          "like a shell"),
    Field("off", "command", "switch it off"),
    Field("cycle", "command", "power-cycle it", default="off, wait, on"),
    Field("bootloader", "command", "a power cycle that comes up in the bootloader (fastboot)"),
)
RELAY_FIELDS = (
    Field("relay", "device path or URL", "the USB serial relay (LCUS protocol) in the board's "
          "supply line", required=True),
    Field("channel", "1..8", "the relay's channel", default="1"),
    Field("baud", "integer > 0", "the relay's baud rate", default="9600"),
    Field("inverted", "boolean", "normally-closed wiring: the board is on while the relay is "
          "open", default="false"),
)
LABGRID_FIELDS = (
    Field("place", "string", "one place by name (not with tags)"),
    Field("tags", "mapping KEY: VALUE", "any place whose tags match (not with place)"),
    Field("count", "1..64", "with tags: how many such places", default="1"),
)
