"""The fault-injection matrix: every fault of the virtual board, injected at run time into a
whole run (real adb server, adbutils, ExecuTorch runtime), classified, recovered from where
possible, and no result lost. The table is printed at the end of the pytest session.

Board A takes the faults; it has a console (pty) and a power switch (its control FIFO, as an
inventory power command). Board B is healthy; in two-board rows it is slowed down (a `slow`
fault) so that A is sure to get work first. Board U imitates upstream's runner (profile
`upstream`) while the inventory claims the full one: it must refuse what the real one would."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hil.adbserver import AdbServer
from hil.board.adb import AdbBoard
from hil.board.recovery import SILENT_S, BoardFrozen, Recovery, ServerKeeper
from hil.errors import InfraError, UsageError
from hil.report.results import load_results
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board

from . import (
    board_entry,
    chain,
    gone,
    lost_results,
    run_in_process,
    tiny_copies,
    tiny_keys,
    wait_until_warm,
    write_inventory,
)
from .conftest import MATRIX_ROWS

pytestmark = pytest.mark.slow  # about a minute: 20 whole runs, recoveries included

IDLE_S = 3.0
"""The runs' idle timeout: a frozen board must be an ERROR_INFRA well before the deadline."""


@dataclass(frozen=True)
class Row:
    """One fault scenario and what must come of it."""

    fault: str
    """The matrix's name for it."""
    on_a: tuple[str, ...] = ()
    """Control requests for board A before the run."""
    expected: dict[str, int] = field(default_factory=dict)
    """Attempt chains of the cases that did not simply pass, with their counts."""
    recovery: str = "not needed"
    """What became of board A: not needed, reconnect, reboot, power-cycle, refused, quarantined."""
    message: str = ""
    """A regex the first non-PASS attempt's message must match."""
    two_boards: bool = False
    kill_adb_server: bool = False
    deadline_s: float = 4.0
    """The runner deadline (`--timeout`)."""
    retries: int = 1
    after_first: tuple[str, ...] = ()
    """Control requests for board A once the first case has finished (a fault that would
    stop the board from coming up if set before)."""
    upstream_board: bool = False
    """Run on board U (runner profile upstream, declared `hil` in the inventory)."""
    flow: str = "portable"


ONE_INFRA = {"ERROR_INFRA→PASS": 1}
ROWS = [
    Row("none"),
    Row("drop during push", ("fault drop,on=push,path=*.pte",), ONE_INFRA, "reconnect",
        r"push failed"),
    Row("drop during exec", ("fault drop,on=exec",), ONE_INFRA, "reconnect", r"shell failed"),
    Row("drop during pull", ("fault drop,on=pull,path=*/output_0.bin",), ONE_INFRA, "reconnect",
        r"pull failed"),
    Row("freeze (stops answering)", ("fault freeze,on=exec",), ONE_INFRA, "power-cycle",
        rf"did not answer for {IDLE_S:g} s", deadline_s=60.0),
    Row("runner SIGSEGV", ("fault crash,signal=SEGV",), {"FAIL_RUN": 1},
        message=r"runner failed executing \(SIGSEGV, exit 139\)"),
    Row("runner SIGABRT", ("fault crash,signal=ABRT",), {"FAIL_RUN": 1},
        message=r"runner failed executing \(SIGABRT, exit 134\)"),
    Row("runner hang", ("fault hang",), {"FAIL_RUN": 1}, message=r"^TIMEOUT"),
    Row("truncated output file", ("fault truncate-output",), {"FAIL_RUN": 1},
        message=r"output 0: output_0\.bin: \d+ bytes, expected \d+"),
    Row("missing output file", ("fault missing-output",), {"FAIL_RUN": 1},
        message=r"wrote no output_0\.bin"),
    Row("wrong numbers on every program", ("fault miscompute",), {"FAIL_MISMATCH": 3},
        message=r"^output 0: max abs error .* exceeds tolerance"),
    Row("wrong chipset", ("fault wrong-chipset",), {}, "refused", two_boards=True),
    Row("storage full on push", ("fault storage-full,path=*.pte",), ONE_INFRA, "reconnect",
        r"No space left on device"),
    Row("storage full at the output folder", ("fault storage-full,on=exec",), ONE_INFRA, "reconnect",
        r"could not write the runner's outputs .*Directory or have no visit permission: \S+/out$"),
    Row("read-only data partition", (), {"ERROR_INFRA": 2}, "quarantined",
        r"the run shell's setup in /data/local/tmp/hil/\S+ failed \(exit \d+\): .*Read-only file system",
        after_first=("fault readonly-data",), retries=0),
    Row("program the runner profile cannot load", (), {"FAIL_LOAD": 3}, "not needed",
        r"^runner could not load the program \(SIGABRT, exit 134\): Loading of method forward failed "
        r"with status 0x20 \(NotFound\): Backend XnnpackBackend is not registered\.$",
        upstream_board=True, flow="xnnpack"),
    Row("reboot mid-case", ("fault reboot,on=exec",), ONE_INFRA, "reconnect"),
    Row("authentication refused", ("fault auth-refused",), {}, "refused", two_boards=True),
    Row("slow link", ("fault slow,delay=0.01",), {}),
    Row("kernel panic on the UART", ("fault panic,on=exec",), ONE_INFRA, "reboot",
        r"console: .*Kernel panic - not syncing"),
    Row("kernel panic, no retries", ("fault panic,on=exec",), {"ERROR_INFRA": 1}, "reboot",
        r"console: .*Kernel panic - not syncing", retries=0),
    Row("adb server dies", (), ONE_INFRA, "reconnect", kill_adb_server=True),
    Row("freeze, other board takes over", ("fault freeze,on=exec",), ONE_INFRA, "power-cycle",
        rf"did not answer for {IDLE_S:g} s", two_boards=True, deadline_s=60.0),
    Row("freeze, then the adb server dies", (), ONE_INFRA, "power-cycle", kill_adb_server=True,
        after_first=("fault freeze,on=now",), deadline_s=60.0),
]


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Boards A, B and U, started once for the matrix and warm."""
    root = tmp_path_factory.mktemp("matrix")
    console = root / "a.tty"
    with start_virtual_board(root / "a", "E9955", "matrix-a",
                             ["--console", str(console), "--reboot-seconds", "0.3"]) as a, \
         start_virtual_board(root / "b", "E9955", "matrix-b", ["--reboot-seconds", "0.3"]) as b, \
         start_virtual_board(root / "u", "E9955", "matrix-u", ["--runner-profile", "upstream"]) as u:
        for board in (a, b, u):
            wait_until_warm(board)
        yield {"a": a, "b": b, "u": u, "console": console, "root": root}


def _healthy(server: AdbServer, board: VirtualBoardProcess) -> bool:
    try:
        server.disconnect(board.address)  # a scenario may have left a dead transport behind
        device = server.connect(board.address, timeout=10.0)
        return device.shell2("getprop sys.boot_completed", timeout=5, v2=True).stdout.strip() == "1"
    except (InfraError, OSError, EOFError) as exc:
        return not str(exc)  # never: a failure is unhealthy


def _restore(server: AdbServer, boards: dict[str, Any]) -> None:
    """Disarm every fault; bring A back by a power cycle if a scenario left it down."""
    for board in (boards["a"], boards["b"]):
        board.control("fault clear", applied_within=30)
    if not _healthy(server, boards["a"]):
        boards["a"].control("power cycle", applied_within=30)
        deadline = time.monotonic() + 60  # until it is back (boot_completed), not a guessed pause
        while not _healthy(server, boards["a"]):
            assert time.monotonic() < deadline, "board A did not come back after its scenario"
            time.sleep(0.2)


def _recovered(run_doc: dict[str, Any]) -> str:
    entry = next(b for b in run_doc["run"]["boards"] if b["name"] == "a")
    if "error" in entry:
        return "refused"
    if entry.get("quarantined"):
        return "quarantined"
    steps = entry.get("recovery") or []
    done = [s["step"] for s in steps if s["recovered"]]
    return done[-1] if done else "not needed"


@pytest.mark.parametrize("row", ROWS, ids=[row.fault for row in ROWS])
def test_fault(row: Row, boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path) -> None:
    a, b = boards["a"], boards["b"]
    entries = [board_entry("a", a, boards["console"], power=True)]
    if row.upstream_board:
        entries = [{**board_entry("a", boards["u"]), "runner_profile": "hil"}]
    if row.two_boards:
        entries.append(board_entry("b", b))
        b.control("fault slow,delay=0.05", applied_within=30)
    inventory = write_inventory(tmp_path / "inventory.yaml", entries)
    for line in row.on_a:
        a.control(line, applied_within=30)
    killed: list[int] = []
    armed: list[str] = []

    def after_record(run: Any, record: dict[str, Any]) -> None:
        if row.after_first and not armed:  # before the kill: a board frozen when its server dies
            armed.append(record["id"])
            for line in row.after_first:
                a.control(line, applied_within=30)
        if row.kill_adb_server and not killed:
            killed.append(run.pool.servers.private.pid)
            os.kill(run.pool.servers.private.pid, signal.SIGKILL)

    try:
        run, doc = run_in_process(inventory, tmp_path / "out", on_record=after_record,
                                  timeout_s=row.deadline_s, idle_timeout_s=IDLE_S,
                                  retries=row.retries, flow=row.flow)
    finally:
        _restore(adb_server, boards)

    cases = doc["cases"]
    observed = Counter(chain(c) for c in cases if chain(c) != "PASS")
    lost = lost_results(tiny_keys(), doc, tmp_path / "out" / "junit.xml")
    recovered = _recovered(doc)
    MATRIX_ROWS.append([
        row.fault,
        _describe(row.expected), _describe(observed), recovered, str(lost),
    ])
    assert lost == 0
    assert observed == Counter(row.expected), [(c["id"], chain(c), c["message"]) for c in cases]
    assert recovered == row.recovery, doc["run"]["boards"]
    assert doc["run"]["status"] == "complete"
    if row.message:
        first = next(c for c in cases if chain(c) != "PASS")
        message = (first["earlier_attempts"] or [first])[0]["message"]
        assert re.search(row.message, message), message
    if not row.expected and row.recovery == "refused":
        assert {c["board"] for c in cases} == {"b"}
    if row.kill_adb_server:
        assert run.pool.servers.keeper_for(run.pool.servers.private).restarts == 1
    if row.two_boards and row.recovery == "power-cycle":
        retried = next(c for c in cases if c["earlier_attempts"])
        assert retried["earlier_attempts"][0]["board"] == "a" and retried["board"] == "b"
    for case in cases:
        if chain(case) != "PASS":
            assert case["logs"], case  # diagnostics attached to every non-pass
    if row.fault.startswith("freeze"):  # found frozen in SILENT_S, then a power cycle: no
        steps = _board(doc, "a")["recovery"]  # reconnect waiting out adb's handshake, no reboot
        assert [(s["step"], s["recovered"]) for s in steps] == [("reconnect", False),
                                                                ("power-cycle", True)], steps
        # hil's own probe found it frozen within its limit (not `adb connect` waiting out
        # adb's 10 s handshake): the message names that limit, whatever the machine's load
        assert steps[0]["message"].startswith("BoardFrozen: "), steps
        assert f"does not answer within {min(SILENT_S, IDLE_S):g} s" in steps[0]["message"], steps
        if row.kill_adb_server:  # the server lost it: hil's own CNXN found it silent
            assert "its adbd accepts a connection but does not answer" in steps[0]["message"], steps
    if row.fault == "runner hang":  # killed on the board by its PID, not left hanging
        console = (tmp_path / "out" / "console" / "a.log").read_text()
        started = set(re.findall(r"runner pid (\d+) started", console))
        exited = set(re.findall(r"runner pid (\d+) exited", console))
        (hung,) = started - exited
        assert gone(int(hung))
    if row.fault.startswith("kernel panic"):  # named, with the UART lines; A rebooted and
        first = next(c for c in cases if chain(c) != "PASS")  # ran the other cases
        attempt = (first["earlier_attempts"] or [first])[0]
        assert "Kernel panic - not syncing" in attempt["logs"]["uart"]
        assert "logcat" in attempt["logs"]
        assert {c["board"] for c in cases} == {"a"}
        assert all(c["verdict"] == "PASS" for c in cases if c is not first or c["earlier_attempts"])


def _describe(chains: dict[str, int]) -> str:
    if not chains:
        return "all PASS"
    return ", ".join(f"{count}x {name}" if count > 1 else name for name, count in sorted(chains.items()))


def _board(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in doc["run"]["boards"] if b["name"] == name)


def _drops_on_a(boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path, cases: tuple[Any, ...],
                times: int) -> dict[str, Any]:
    """The results of `cases` on A (power, console), its runner execs cut `times` times (0:
    every time), and B slowed so that A takes cases too."""
    a, b = boards["a"], boards["b"]
    inventory = write_inventory(tmp_path / "inventory.yaml",
                                [board_entry("a", a, boards["console"], power=True), board_entry("b", b)])
    a.control(f"fault drop,on=exec,times={times}", applied_within=30)
    b.control("fault slow,delay=0.05", applied_within=30)
    try:
        _run, doc = run_in_process(inventory, tmp_path / "out", cases=cases, idle_timeout_s=IDLE_S)
    finally:
        _restore(adb_server, boards)
    return doc


def test_a_board_that_fails_every_case_costs_its_errors_in_a_row_and_the_other_runs_them(
    boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    """A board whose every runner exec is cut: quarantined after two errors in a row, checked
    at once (a first quarantine), back, and quarantined again after its next two; every case
    passes on B. How many cases A reaches before B has run them all is the machine's timing,
    so the row says what was observed, and the test what holds whatever it is."""
    cases = tiny_copies(12)
    doc = _drops_on_a(boards, adb_server, tmp_path, cases, times=0)
    entry = _board(doc, "a")
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    assert {c["board"] for c in doc["cases"]} == {"b"}
    failed_on_a = [a_ for c in doc["cases"] for a_ in c["earlier_attempts"] if a_["board"] == "a"]
    assert failed_on_a and all(f["verdict"] == "ERROR_INFRA" for f in failed_on_a)
    probation = entry["probation"]
    assert probation[0]["why"] == "2 infrastructure errors in a row" and probation[0]["back"]
    assert all(p["health_check"] == "passed" for p in probation)  # it answers: only its cases fail
    assert len(failed_on_a) <= 2 * (len(probation) + 1)  # at most two errors a quarantine
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0
    MATRIX_ROWS.append(["infra error every time", "n x ERROR_INFRA→PASS",
                        _describe(Counter(chain(c) for c in doc["cases"] if chain(c) != "PASS")),
                        f"quarantined {len(probation) + bool(entry.get('quarantined'))}x", "0"])


def test_board_quarantined_for_errors_in_a_row_comes_back_after_its_health_check(
    boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    cases = tiny_copies(8)
    doc = _drops_on_a(boards, adb_server, tmp_path, cases, times=2)  # two errors in a row, then healthy
    entry = _board(doc, "a")
    assert "quarantined" not in entry
    assert [(p["why"], p["health_check"], p["back"]) for p in entry["probation"]] == [
        ("2 infrastructure errors in a row", "passed", True)]
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    failed_on_a = [c for c in doc["cases"] if c["earlier_attempts"]]
    assert len(failed_on_a) == 2 and all(c["earlier_attempts"][0]["board"] == "a" for c in failed_on_a)
    back = max(c["earlier_attempts"][0]["finished"] for c in failed_on_a)
    assert any(c["board"] == "a" and c["started"] > back for c in doc["cases"])  # used again
    keys = [case.key for case in cases]
    assert lost_results(keys, doc, tmp_path / "out" / "junit.xml") == 0
    MATRIX_ROWS.append(["2 infra errors in a row, then healthy", "2x ERROR_INFRA→PASS",
                        _describe(Counter(chain(c) for c in doc["cases"] if chain(c) != "PASS")),
                        "quarantined, health check, back", "0"])


def test_dead_board_comes_back_when_fixed_while_another_carries_the_run(
    boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    a, b = boards["a"], boards["b"]
    cases = tiny_copies(12)
    out = tmp_path / "out"
    inventory = write_inventory(tmp_path / "inventory.yaml",  # A without power control
                                [board_entry("a", a), board_entry("b", b)])
    a.control("fault freeze,on=exec", applied_within=30)  # the ladder (reconnect, reboot) cannot bring it back
    b.control("fault slow,delay=0.15", applied_within=30)  # B must not finish everything while A is out
    fixed: list[str] = []

    def operator() -> None:  # power-cycles A by hand once hil has given up on it
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not fixed:
            try:
                quarantined = _board(load_results(out / "results.json"), "a").get("quarantined")
            except (StopIteration, UsageError):  # A not up yet, or no results file yet
                quarantined = None
            if quarantined == "recovery failed":
                a.cycle()
                fixed.append(quarantined)
            time.sleep(0.1)

    helper = threading.Thread(target=operator, daemon=True)
    helper.start()
    try:
        _run, doc = run_in_process(inventory, out, cases=cases, idle_timeout_s=IDLE_S)
    finally:
        fixed.append("done")
        helper.join()
        _restore(adb_server, boards)
    entry = _board(doc, "a")
    assert fixed[0] == "recovery failed"
    assert "quarantined" not in entry
    assert entry["probation"][-1]["back"] is True
    assert entry["probation"][0]["why"] == "recovery failed"
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    (frozen,) = [c for c in doc["cases"] if c["earlier_attempts"]]
    assert any(c["board"] == "a" and c["started"] > frozen["earlier_attempts"][0]["finished"]
               for c in doc["cases"])
    MATRIX_ROWS.append(["freeze, no power control, fixed by hand", "ERROR_INFRA→PASS",
                        _describe(Counter(chain(c) for c in doc["cases"] if chain(c) != "PASS")),
                        "quarantined, health check, back", "0"])


def test_a_board_that_freezes_while_it_reboots_is_found_frozen_not_waited_for(
    boards: dict[str, Any], adb_server: AdbServer
) -> None:
    """The reboot rung's wait meets a board that came up frozen (the soak deals such faults to
    recovering boards): its adbd accepts hil's connection and stays silent, so the wait ends
    with BoardFrozen (the power cycle's turn) instead of reconnecting until the boot timeout,
    each `adb connect` waiting out adb's own handshake."""
    a = boards["a"]
    device = adb_server.connect(a.address, timeout=10.0)
    board = AdbBoard("a", a.address, device, "frozen-reboot", Path("enn_executor_runner"), 10.0, IDLE_S)
    recovery = Recovery(board, ServerKeeper(adb_server), adb_server.connect, adb_server.disconnect,
                        network=True, idle_s=IDLE_S, boot_s=60.0)
    try:
        recovery.reboot_to("", 30.0)  # the board has left `device`: it is rebooting
        a.control("fault freeze,on=now", applied_within=30)  # ...and comes up frozen
        with pytest.raises(BoardFrozen, match="its adbd accepts a connection but does not answer"):
            recovery.wait_booted(60.0)
    finally:
        a.control("power cycle", applied_within=30)  # what the ladder's next rung does
        _restore(adb_server, boards)


@pytest.mark.parametrize("power", [True, False], ids=["power control", "no power control"])
def test_a_board_frozen_before_the_run_is_found_frozen_at_once_and_cycled_when_it_can_be(
    power: bool, boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    """A board left frozen (by an earlier run, say): its adbd accepts the bring-up's connection
    and stays silent. With power control it is cycled, waited for and runs cases, the cycle its
    first recovery step; without, it is not usable, named frozen (not an `adb connect` that
    waited out the idle timeout), and B runs every case."""
    a, b = boards["a"], boards["b"]
    entries = [board_entry("a", a, power=power), board_entry("b", b)]
    b.control("fault slow,delay=0.05", applied_within=30)  # so that A, once up, takes cases
    a.control("fault freeze,on=now", applied_within=30)
    cases = tiny_copies(6)
    try:
        _run, doc = run_in_process(write_inventory(tmp_path / "inventory.yaml", entries),
                                   tmp_path / "out", cases=cases, idle_timeout_s=IDLE_S)
    finally:
        a.control("power cycle", applied_within=30)  # frozen still, without power control
        _restore(adb_server, boards)
    entry = _board(doc, "a")
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0
    frozen = "its adbd accepts a connection but does not answer"
    if power:
        (step,) = entry["recovery"]
        assert (step["step"], step["recovered"]) == ("power-cycle", True)
        assert step["message"].startswith("at bring-up: a (") and frozen in step["message"]
        assert any(c["board"] == "a" for c in doc["cases"])
    else:
        assert frozen in entry["error"]
        assert {c["board"] for c in doc["cases"]} == {"b"}
    MATRIX_ROWS.append([f"frozen before the run, {'power' if power else 'no power'}", "all PASS",
                        _describe(Counter(chain(c) for c in doc["cases"] if chain(c) != "PASS")),
                        "power-cycle at bring-up" if power else "not usable (frozen)", "0"])


def _powered_a_and_slow_b(boards: dict[str, Any], tmp_path: Path) -> Path:
    """An inventory of A (console, power control) and B, B slowed so that A takes cases too."""
    boards["b"].control("fault slow,delay=0.05", applied_within=30)
    return write_inventory(tmp_path / "inventory.yaml",
                           [board_entry("a", boards["a"], boards["console"], power=True),
                            board_entry("b", boards["b"])])


def _after_first_case(action: Callable[[], object]) -> Callable[[Any, dict[str, Any]], None]:
    """A run's on_record that does `action` once, when the first case has finished."""
    done: list[bool] = []

    def fire(_run: Any, _record: dict[str, Any]) -> None:
        if not done:
            done.append(True)
            action()

    return fire


def test_a_board_that_stops_trusting_the_host_is_quarantined_at_once_with_the_hint(
    boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    """`unauthorized` needs a person: no reboot or power cycle is tried (A has power control),
    the board is quarantined after the reconnect that found it, with the RSA-key hint."""
    a = boards["a"]
    cases = tiny_copies(6)
    inventory = _powered_a_and_slow_b(boards, tmp_path)

    def distrust() -> None:  # A is up and trusted the host; from now on it refuses the key
        a.control("fault auth-refused", applied_within=30)
        a.control("fault drop,on=exec", applied_within=30)

    try:
        _run, doc = run_in_process(inventory, tmp_path / "out", on_record=_after_first_case(distrust),
                                   cases=cases, idle_timeout_s=IDLE_S)
    finally:
        _restore(adb_server, boards)
    entry = _board(doc, "a")
    assert {step["step"] for step in entry["recovery"]} == {"reconnect"}, entry["recovery"]
    assert all("adb key" in step["message"] for step in entry["recovery"]), entry["recovery"]
    assert entry["quarantined"].startswith("recovery failed")
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0


def test_a_board_whose_enn_library_stops_loading_is_out_at_once_and_its_cases_pass_elsewhere(
    boards: dict[str, Any], adb_server: AdbServer, tmp_path: Path
) -> None:
    """ENN's library gone from the vendor partition mid-run: the runner's `Lib load failed.`
    and segfault are the board's (ERROR_INFRA, never FAIL_LOAD), no recovery step is tried (a
    reboot does not bring a library back), and B runs the case again."""
    library = Path(boards["a"].root) / "fs" / "vendor" / "lib64" / "libenn_public_api_cpp.so"
    kept = library.read_bytes()
    cases = tiny_copies(6)
    inventory = _powered_a_and_slow_b(boards, tmp_path)
    try:
        _run, doc = run_in_process(inventory, tmp_path / "out", on_record=_after_first_case(library.unlink),
                                   cases=cases, idle_timeout_s=IDLE_S)
    finally:
        library.write_bytes(kept)
        _restore(adb_server, boards)
    entry = _board(doc, "a")
    assert entry["quarantined"].startswith("needs a person: a: the board is not usable for ENN")
    assert entry.get("recovery", []) == []  # no rung was climbed
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    retried = [c for c in doc["cases"] if c["earlier_attempts"]]
    assert retried and all(c["earlier_attempts"][0]["board"] == "a" and c["board"] == "b" for c in retried)
    assert "Failed to load enn api library" in retried[0]["earlier_attempts"][0]["message"]
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0
