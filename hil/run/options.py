"""What `hil run` was asked to do: one validated record, built by the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hil.board.inventory import InventoryEntry
from hil.board.spec import BoardSpec
from hil.cases.case import Case
from hil.latency_plan import LatencyPlan
from hil.pool.sources import BoardSource

CHIPSETS = ("E9955", "E9965")
"""Exynos chipsets the ENN backend supports (`SamsungChipset`)."""


@dataclass(frozen=True)
class RunOptions:
    """Everything `hil run` was asked to do, validated by the CLI."""

    cases: tuple[Case, ...]
    boards: tuple[BoardSpec, ...]
    flow: str
    """The flow asked for: `auto` or one of hil.lower.flows.FLOWS; the run chooses and checks
    it against every board's runner once the boards are up, before lowering anything."""
    chipset: str
    out_dir: Path
    results_path: Path
    junit_path: Path
    shard: tuple[int, int] = (1, 1)
    timeout_s: float = 120.0
    retries: int = 1
    iterations: int = 1
    warmup: int = 0
    runner: Path | None = None
    latency: LatencyPlan | None = None
    """How the cases' latency is measured (hil/latency_plan.py); None: `iterations` and
    `warmup` with the default noise control."""
    suite_latency: dict[str, LatencyPlan] = field(default_factory=dict)
    """Suites (by name) that declare a plan of their own (a manifest's `latency:`)."""
    command: tuple[str, ...] = ()
    cache_dir: Path | None = None
    """Artifact cache folder; None disables the cache."""
    jobs: int = 2
    """Lowering worker processes."""
    virtual_link: str = "none"
    """Link shaping of the virtual boards hil starts (`none`, `usb2`, `usb3`)."""
    virtual_device_time: str | None = None
    """The off-host measuring mode of the virtual boards hil starts (`measured` or ms per
    execution, hil/virtual/offhost.py); None: off."""
    inventory: tuple[InventoryEntry, ...] = ()
    """The boards, from `--inventory` and `--board`; empty: one per `boards` spec."""
    sources: tuple[BoardSource, ...] = ()
    """Board sources beyond `inventory`/`boards` (hil/pool/sources.py), e.g. a lab engine's."""
    idle_timeout_s: float = 30.0
    """A board silent this long is lost (ERROR_INFRA); also the limit of a reconnect."""
    boot_timeout_s: float = 120.0
    """The limit of a reboot or power cycle, until `sys.boot_completed=1`."""
    runner_profile: str | None = None
    """`--runner-profile`: what every board's runner can execute (hil/runner/profiles.py);
    None: learnt per board. Also the profile of the virtual boards hil starts."""
    adb_server: str | None = None
    """`--adb-server` (or ANDROID_ADB_SERVER_*): the lab server of the boards hil does not
    start; None: hil.board.servers decides per board."""
    board_wait_s: float = 0.0
    """How long to wait for a board another run holds (its lease) before leaving it out."""
    provision: bool = False
    """`--provision`: before its first case, a board whose build is not the inventory's
    `expected_build` gets its images flashed (hil/provision); one at that build, nothing."""
    flash_timeout_s: float = 300.0
    """`--flash-timeout`: limit of one image's flash (provisioning and the REFLASH rung)."""
    localize: bool = False
    """`--localize`: bisect every FAIL_MISMATCH case's graph (a known failure's too) on the
    board it failed on (hil/localize) and add the `localization` block to its record."""
    keep_outputs: bool = False
    """`--keep-outputs`: every case's board outputs go to `OUT/cases/<slot>/output-<board>/`;
    otherwise only those of cases that did not pass (creating two folders and a file per
    case was a sixth of hil's CPU per case, on ext4: scripts/bench_boards.py)."""

    def plan_for(self, suite: str) -> LatencyPlan:
        """The latency plan of a case of `suite`."""
        return (self.suite_latency.get(suite) or self.latency
                or LatencyPlan(self.warmup, self.iterations))
