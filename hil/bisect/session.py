"""One `hil bisect`: from two results files to an answer, with the evidence beside it.

```
GOOD.json, BAD.json ─► cases (selection.py) ─► tuples and what changed (tuple.py)
   ─► factors with candidates (firmware.py, runner_builds.py, python_env.py); their ends made
   ─► boards: the pool (hil/pool), the dispatcher (boards.py), the journal (journal.py)
   ─► the plan (search.py) ─► bisect.json, bisect.md, bisect.png (report.py)
```
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hil.bisect import report
from hil.bisect.answers import EXIT_CODES, INTERRUPTED, NO_BOARD, RANGE
from hil.bisect.boards import BisectBoards, RunSetup, Stopped
from hil.bisect.candidates import Candidate, Factor
from hil.bisect.journal import Journal
from hil.bisect.search import Answer, Bisection, Settings
from hil.bisect.selection import Selection, select
from hil.bisect.tuple import Change, changes, read_tuple
from hil.board.images import Provisioning
from hil.board.inventory import InventoryEntry
from hil.errors import UsageError
from hil.interrupts import Stop, wait_until
from hil.report.results import load_results, utc_now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BisectOptions:
    """What `hil bisect` was asked (validated by hil/commands/bisect.py)."""

    good: Path
    bad: Path
    out: Path
    suites: tuple[str, ...] = ()
    """Empty: the `--suite`s of BAD's own command (else smoke)."""
    pretrained: bool = False
    filters: tuple[str, ...] = ()
    threshold: float = 0.10
    min_delta_ms: float = 0.02
    firmware_builds: Path | None = None
    runner_repo: Path | None = None
    runner_build: str | None = None
    wheels: Path | None = None
    index_url: str | None = None
    package: str = "executorch"
    inventory: str | None = None
    boards: tuple[str, ...] = ()
    labgrid: str | None = None
    adb_server: str | None = None
    board_wait_s: float = 600.0
    runner: Path | None = None
    samples: int = 10
    warmup: int = 1
    attempts: int = 3
    timeout_s: float = 120.0
    idle_timeout_s: float = 30.0
    boot_timeout_s: float = 120.0
    flash_timeout_s: float = 300.0
    retries: int = 1
    cache_dir: Path | None = None
    virtual_device_time: str | None = None
    virtual_reboot_s: float = 2.0
    command: tuple[str, ...] = ()


@dataclass
class Outcome:
    exit_code: int
    document: dict[str, Any]
    paths: dict[str, Path] = field(default_factory=dict)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _suites_of(document: dict[str, Any]) -> list[str]:
    """The `--suite` values of a run's command (its suites, as it named them)."""
    command = document["run"].get("command") or []
    found = [command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "--suite"]
    found += [arg.split("=", 1)[1] for arg in command if arg.startswith("--suite=")]
    return found or ["smoke"]


def _cases(options: BisectOptions, bad: dict[str, Any],
           keys: list[str]) -> tuple[list[Any], list[str], dict[str, str]]:
    """The bisected cases as this hil defines them, the suites they came from, and the digest
    of this hil's definitions of BAD's planned cases per suite (results.json `run.suites`)."""
    from hil.cases import expand_precisions, load_suite
    from hil.run.records import suite_digests

    suites = list(options.suites) or _suites_of(bad)
    cases = []
    for suite in suites:
        cases += expand_precisions(load_suite(suite, pretrained=options.pretrained), "all")
    by_key = {case.key: case for case in cases}
    missing = [key for key in keys if key not in by_key]
    if missing:
        raise UsageError(f"case {missing[0]} of BAD is not in the suites {', '.join(suites)} "
                         "(name them with --suite)")
    planned = set(bad["run"].get("planned") or keys)
    current = suite_digests([case for case in cases if case.key in planned])
    return [by_key[key] for key in keys], suites, {name: entry["digest"] for name, entry in current.items()}


def _suite_notes(changed: list[Change], current: dict[str, str]) -> list[str]:
    """What this hil's suite definitions are, when GOOD's and BAD's differ: every board run
    uses this hil's, so the confirmation's good runs run BAD's definitions when they are its."""
    notes = []
    for change in changed:
        if change.element != "suites":
            continue
        for suite, bad_digest in (change.bad or {}).items():
            good_digest = (change.good or {}).get(suite)
            mine = current.get(suite)
            if good_digest == bad_digest:
                continue
            whose = ("BAD's" if mine == bad_digest else "GOOD's" if mine == good_digest
                     else "neither GOOD's nor BAD's")
            notes.append(f"suites: {suite}'s case definitions changed between GOOD and BAD; this hil's "
                         f"are {whose}, and every board run uses them"
                         + (": a good run that fails points at the definitions' change"
                            if mine == bad_digest else ""))
    return notes


def _boards_of(document: dict[str, Any], keys: list[str]) -> set[str]:
    return {case["board"] for case in document["cases"]
            if f"{case['suite']}.{case['precision']}.{case['id']}" in keys and case.get("board")}


def _factors(options: BisectOptions, changed: list[Change], good: Any, bad: Any, request: dict[str, Any],
             notes: list[str]) -> list[Factor]:
    """The changed elements with candidates, cheapest first."""
    from hil.commands.common import cache_dir

    factors: list[Factor] = []
    wanted = {change.element for change in changed if change.source is not None}
    given = {"firmware": options.firmware_builds, "runner": options.runner_repo,
             "python": options.wheels or options.index_url}
    for element, value in given.items():
        if value is not None and element not in wanted:
            notes.append(f"{element}: candidates given, but GOOD and BAD record the same {element}: "
                         "not bisected")
    if "firmware" in wanted:
        from hil.bisect.firmware import FirmwareBuilds

        assert options.firmware_builds is not None
        factors.append(FirmwareBuilds(options.firmware_builds, good.firmware, bad.firmware))
    if "runner" in wanted:
        from hil.bisect.runner_builds import RunnerBuilds

        assert options.runner_repo is not None and options.runner_build is not None
        factors.append(RunnerBuilds(options.runner_repo, options.runner_build, good.runner_commit,
                                    bad.runner_commit, options.out / "builds" / "runner"))
    if "python" in wanted:
        from hil.bisect.python_env import IndexVersions, Wheels

        store = cache_dir(str(options.cache_dir) if options.cache_dir else None) / "bisect" / "python"
        if options.wheels is not None:
            factors.append(Wheels(options.wheels, good.packages, bad.packages, store, request))
        else:
            assert options.index_url is not None
            factors.append(IndexVersions(options.index_url, options.package, good.packages, bad.packages,
                                         store, request))
    return factors


def _virtual_entries(entries: list[InventoryEntry], options: BisectOptions, chipset: str,
                     on_stop: list[Callable[[], Any]]) -> list[InventoryEntry]:
    """`--board virtual[:N]` boards started here, for the whole bisection (a pool would start
    them per run): network boards with their fastboot endpoint and power switch."""
    from hil import lifeline
    from hil.virtual.images import product
    from hil.virtual.launcher import start_virtual_board

    started = []
    for entry in entries:
        if not entry.virtual:
            started.append(entry)
            continue
        root = Path(tempfile.mkdtemp(prefix=f"hil-bisect-{entry.name}-"))
        on_stop.append(lambda root=root: shutil.rmtree(root, ignore_errors=True))
        lifeline.remove_with(root)
        extra = ["--reboot-seconds", f"{options.virtual_reboot_s:g}"]
        if options.virtual_device_time:
            extra += ["--device-time", options.virtual_device_time]
        process = start_virtual_board(root, chipset, entry.name, extra, wait_warm=True)
        on_stop.append(process.stop)
        started.append(replace(entry, adb=process.address, virtual=False, power=process,
                               console=process.console,
                               provisioning=Provisioning((), None, product(chipset), process.fastboot)))
    return started


def _out_of_bootloader(entries: list[InventoryEntry], boot_s: float, say: Callable[[str], None]) -> None:
    """Boards found in their bootloader (a bisection killed while it flashed them) booted back
    into Android, and a network board waited for on its adb port (up to `boot_s`), so that
    the pool can bring them up."""
    import socket
    import time

    from hil.errors import InfraError
    from hil.provision import flasher_for

    for entry in entries:
        if entry.provisioning is None or not entry.provisioning.fastboot:
            continue
        flasher = flasher_for(entry.provisioning)
        if not flasher.answers():
            continue
        say(f"hil bisect: {entry.name} is in its bootloader (a flash cut short?): rebooting it")
        try:
            flasher.boot()
        except InfraError as exc:
            log.warning("%s: fastboot reboot failed: %s", entry.name, exc)
            continue
        host, _, port = entry.adb.rpartition(":")
        deadline = time.monotonic() + boot_s
        while entry.network and time.monotonic() < deadline:
            try:
                socket.create_connection((host, int(port)), timeout=1.0).close()
                break
            except OSError:
                time.sleep(0.2)


def bisect(options: BisectOptions, stop: Stop, say: Callable[[str], None]) -> Outcome:
    """The whole bisection (module docstring); its exit code and bisect.json."""
    good_doc, bad_doc = load_results(options.good), load_results(options.bad)
    selection = select(good_doc, bad_doc, list(options.filters), options.threshold, options.min_delta_ms)
    cases, suites, current_suites = _cases(options, bad_doc, selection.keys)
    good = read_tuple(good_doc, _boards_of(good_doc, selection.keys))
    bad = read_tuple(bad_doc, _boards_of(bad_doc, selection.keys))
    sources = {"firmware": "--firmware-builds" if options.firmware_builds else None,
               "runner": "--runner-repo" if options.runner_repo else None,
               "python": "--wheels" if options.wheels else "--index-url" if options.index_url else None}
    changed = changes(good, bad, {k: v for k, v in sources.items() if v})
    notes = [*good.notes, *bad.notes, *_suite_notes(changed, current_suites)]
    flow, chipset = bad_doc["run"].get("flow") or "xnnpack", bad_doc["run"].get("chipset") or "E9955"
    request = {"suites": suites, "keys": selection.keys, "flow": flow, "chipset": chipset,
               "pretrained": options.pretrained}
    factors = _factors(options, changed, good, bad, request, notes)
    header = {"command": list(options.command), "started": utc_now(),
              "good": {"path": str(options.good), "run_id": good_doc["run"].get("id"),
                       "tuple": good.record()},
              "bad": {"path": str(options.bad), "run_id": bad_doc["run"].get("id"),
                      "tuple": bad.record()},
              "changed": [change.record() for change in changed], "cases": selection.record(),
              "flow": flow, "chipset": chipset, "notes": notes}
    listed = [f"{c.element}{'' if c.source else ' (no candidates)'}" for c in changed]
    say(f"hil bisect: {len(selection.keys)} case(s) by {selection.metric}; changed: "
        + (", ".join(listed) or "nothing recorded"))
    identity = {"good": _sha256(options.good), "bad": _sha256(options.bad), "cases": selection.keys,
                "metric": selection.metric, "samples": options.samples, "warmup": options.warmup,
                "attempts": options.attempts,
                "factors": {f.name: [c.key for c in f.candidates] for f in factors}}
    if not factors:  # nothing to swap on a board: what changed is the answer
        settings = Settings(boards=0, metric=selection.metric, primary=selection.primary)
        what = "; ".join(f"{c.element} {c.good} -> {c.bad}" for c in changed) or "nothing they record"
        answer = Answer(RANGE, f"nothing bisected: changed between GOOD and BAD: {what}; give the "
                        "candidates of one (--firmware-builds, --runner-repo and --runner-build, "
                        "--wheels or --index-url)")
        header["runs_made_now"] = 0
        return _report(options, Bisection([], settings, lambda jobs, number: []), answer, header, "complete")
    journal = Journal(options.out, identity)
    try:
        return _with_boards(options, stop, say, selection, cases, factors, journal, header, flow, chipset)
    finally:
        journal.close()


def _prepare_ends(factors: list[Factor], say: Callable[[str], None]) -> None:
    for factor in factors:
        for candidate in (factor.candidates[0], factor.candidates[-1]):
            say(f"hil bisect: preparing {factor.name} {candidate.label} ...")
            reason = factor.prepare(candidate)
            if reason is not None:
                end = "GOOD" if candidate.index == 0 else "BAD"
                raise UsageError(f"{factor.source}: {end}'s {factor.name} build {candidate.label} "
                                 f"cannot be made: {reason}")


def _with_boards(options: BisectOptions, stop: Stop, say: Callable[[str], None], selection: Selection,
                 cases: list[Any], factors: list[Factor], journal: Journal, header: dict[str, Any],
                 flow: str, chipset: str) -> Outcome:
    from hil.pool.bringup import PoolOptions, virtual_runner
    from hil.pool.labgrid import board_sources
    from hil.pool.pool import BoardPool
    from hil.pool.sources import StaticSource
    from hil.run.records import versions

    _prepare_ends(factors, say)
    by_name = {factor.name: factor for factor in factors}
    base = {} if "python" in by_name else _lower_here(cases, flow, chipset, options, header)
    runner_factor = by_name.get("runner")

    def runners(candidate: Candidate | None, virtual: bool) -> Path:
        if candidate is not None:
            return runner_factor.runner(candidate)  # type: ignore[union-attr]
        runner = virtual_runner(options.runner) if virtual else options.runner
        if runner is None:
            raise UsageError("--runner: a real board needs the enn_executor_runner built for Android")
        return runner

    def artifacts(candidate: Candidate | None) -> dict[str, Any]:
        return base if candidate is None else by_name["python"].lowered[candidate.key]  # type: ignore[attr-defined]

    here = {key: value for key, value in versions().items() if key in ("packages", "executorch_git")}

    def environment(candidate: Candidate | None) -> dict[str, Any]:
        return here if candidate is None else by_name["python"].environments[candidate.key]  # type: ignore[attr-defined]

    entries, sources = board_sources(options.inventory, list(options.boards), options.labgrid)
    undo: list[Callable[[], Any]] = []
    try:
        entries = _virtual_entries(entries, options, chipset, undo)
        if "firmware" in by_name:
            from hil.bisect.firmware import check_boards

            check_boards(entries)
            _out_of_bootloader(entries, options.boot_timeout_s, say)
        default_runner = (runner_factor.runner(runner_factor.candidates[0])  # type: ignore[attr-defined]
                          if runner_factor is not None else options.runner)
        run_id = "bisect-" + hashlib.sha256(str(options.out.resolve()).encode()).hexdigest()[:12]
        pool_options = PoolOptions(
            chipset=chipset, run_id=run_id, out_dir=options.out,
            runner=default_runner, timeout_s=options.timeout_s, idle_timeout_s=options.idle_timeout_s,
            boot_timeout_s=options.boot_timeout_s, adb_server=options.adb_server,
            board_wait_s=options.board_wait_s, flash_timeout_s=options.flash_timeout_s)
        pool = BoardPool(([StaticSource(entries)] if entries else []) + list(sources), pool_options, stop)
        setup = RunSetup(tuple(cases), flow, chipset, options.out, options.command, options.retries,
                         options.flash_timeout_s, options.boot_timeout_s, options.idle_timeout_s)
        dispatcher = BisectBoards(pool, stop, setup, journal, by_name.get("firmware"), runners, artifacts,
                                  environment)
        with pool:
            pool.start(dispatcher)
            try:
                answer, bisection = _search(pool, dispatcher, stop, factors, selection, options, flow, say)
            finally:
                dispatcher.close()
                pool.wait_done()
    finally:
        for step in reversed(undo):
            step()
    header["runs_made_now"] = dispatcher.made
    return _report(options, bisection, answer, header, "interrupted" if stop.is_set() else "complete")


def _report(options: BisectOptions, bisection: Bisection, answer: Answer, header: dict[str, Any],
            status: str) -> Outcome:
    """bisect.json, bisect.md and bisect.png in --out; the outcome."""
    header["finished"] = utc_now()
    document = report.document(bisection, answer, header, status)
    paths = {"json": report.write(options.out, document)}
    markdown = report.markdown(document)
    (options.out / "bisect.md").write_text(markdown, encoding="utf-8")
    paths["markdown"] = options.out / "bisect.md"
    if report.plot(document, options.out / "bisect.png"):
        paths["plot"] = options.out / "bisect.png"
    return Outcome(EXIT_CODES[answer.kind], document, paths)


def _search(pool: Any, dispatcher: BisectBoards, stop: Stop, factors: list[Factor], selection: Selection,
            options: BisectOptions, flow: str, say: Callable[[str], None]) -> tuple[Answer, Bisection]:
    from hil.runner.profiles import choose_flow

    settings = Settings(boards=1, metric=selection.metric, primary=selection.primary,
                        samples=options.samples, warmup=options.warmup, attempts=options.attempts)
    if not wait_until(pool.settled, stop) or not pool.usable:
        bisection = Bisection(factors, settings, dispatcher.run_round)
        return Answer(NO_BOARD, f"no usable board: {pool.causes() or 'interrupted'}"), bisection
    precisions = sorted({key.split(".")[1] for key in selection.keys})
    choose_flow(flow, pool.runners(), precisions, None)
    settings = replace(settings, boards=pool.usable)
    say(f"hil bisect: {pool.usable} board(s): {', '.join(sorted(pool.live_names()))}")
    bisection = Bisection(factors, settings, dispatcher.run_round)
    try:
        return bisection.run(), bisection
    except Stopped as stopped:
        kind = INTERRUPTED if stopped.interrupted else NO_BOARD
        return Answer(kind, f"{stopped}: the state is kept in --out, the same command goes on"), bisection


def _lower_here(cases: list[Any], flow: str, chipset: str, options: BisectOptions,
                header: dict[str, Any]) -> dict[str, Any]:
    """The cases lowered in this environment (hil's artifact cache: a firmware or runner
    bisection lowers nothing a run before it lowered: `lowered` in bisect.json says)."""
    from hil.commands.common import cache_dir
    from hil.lower.cache import ArtifactCache
    from hil.lower.pool import lower_cases

    lowered: dict[str, Any] = {}
    cache = ArtifactCache(cache_dir(str(options.cache_dir) if options.cache_dir else None))
    counts = {"cases": len(cases), "from_cache": 0, "lowered": 0}
    header["lowered"] = counts
    for lowering in lower_cases(cases, flow, chipset, options.out / "artifacts", cache, 1):
        counts["from_cache" if lowering.cached else "lowered"] += 1
        key = cases[lowering.index].key
        lowered[key] = lowering.artifact if lowering.artifact is not None else {
            "verdict": lowering.verdict.value if lowering.verdict else "ERROR_INTERNAL",
            "message": lowering.message}
    return lowered
