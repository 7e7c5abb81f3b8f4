#!/usr/bin/env python3
"""Throughput benchmark of hil on virtual boards (figures, not pass/fail).

One process measures, on the same virtual boards and link, and prints tables:
  (a) the upstream Samsung device flow replicated with adbutils vs hil, per op case;
  (b) hil vs a minimal client doing the same three operations on the same board and link
      (`MinimalClient` below), and where a case's time goes;
  (c) hil vs the link-limited minimum (bytes / bandwidth + 3 round trips + the runner's own
      work) plus the board's own per-exec cost (a kept-shell command and the runner front, both
      measured on an unshaped board), per case; and vs the link minimum plus everything the
      board does for a case (the minimal client's whole case on an unshaped board);
  (d) 1 vs 4 virtual boards on >= 40 cases (board phase of a real `Run`, lowering cached),
      with the CPU each case costs hil and the boards: bound by this rig, whose boards run
      every program on the host's own cores (`scaling_4_boards_rig`);
  (e) cold vs warm lowering of the suite;
  (f) 1, 4 and 16 virtual boards in the off-host measuring mode (hil/virtual/offhost.py:
      outputs replayed, device time slept), so that the boards cost hil's work only:
      hil's CPU per case (the `hil run` process and its private adb server, CPU time),
      cases/s, the scaling ratios and the ceiling they imply (scripts/bench_boards.py).
`--json FILE` writes the figures: seed_speedup, hil_vs_minimal_client, overhead_vs_link_min,
overhead_vs_board_floor, scaling_4_boards_rig, warm_relower_count, warm_vs_cold, the per-case
breakdown, board costs, CPU per case and the machine's load average; from (f)
hil_cpu_ms_per_case, cases_per_s_{1,4,16}_boards, scaling_4_boards, scaling_16_boards,
hil_cpu_ceiling_cases_per_s, hil_cpu_ceiling_boards_per_core (with each measurement's load
average under `offhost`).

The minimal client is the floor for what hil does per case: ~80 lines of Python on raw
sockets, no adbutils, no threads, no watchdog, no parsing, no results. Like hil, it keeps two
connections from case to case (each opened with `host:transport:SERIAL`, Nagle off, quick
ACKs): a sync connection, which pushes the `.pte`, inputs and folder markers (acknowledgements
read at the end) and pulls the outputs and `statistics.txt` files, and a `shell,v2:sh` to
whose stdin it writes exactly the run shell hil runs (`AdbBoard.run_chain`) with hil's
sentinels (hil/board/kept_shell.py). hil / that client is what hil's own code costs; the
board's work is the same for both.

Usage: .venv/bin/python scripts/bench.py [--suite ops] [--link usb2] [--cases 10] [--json bench.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import posixpath
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hil.adbserver import AdbServer
from hil.board.adb import AdbBoard
from hil.board.commands import device_command
from hil.board.invocation import RUNNER_NAME, RUNNER_PATH, folder_markers
from hil.board.kept_shell import sentinel_script
from hil.board.preflight import VIRTUAL_RUNNER
from hil.cases import load_suite
from hil.cases.case import Case
from hil.latency_plan import NoiseControl
from hil.lower.artifact import Artifact
from hil.lower.cache import ArtifactCache
from hil.lower.pool import lower_cases
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from hil.virtual.link import LINKS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_boards import board_throughput, copies, lower_all, offhost_scaling  # noqa: E402

UPSTREAM_WORKDIR = "/data/local/tmp/enn-executorch-test"


class MinimalClient:
    """The least a client can do for a case: see the module docstring."""

    def __init__(self, server_socket: Path, serial: str) -> None:
        self.address = str(server_socket)
        """hil's private adb server's unix socket (hil/adbserver.py)."""
        self.serial = serial
        self._sync: socket.socket | None = None
        self._shell: socket.socket | None = None

    def _open(self, service: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.address)
        for request in (f"host:transport:{self.serial}", service):
            data = request.encode()
            sock.sendall(b"%04x" % len(data) + data)
            if self._exact(sock, 4) != b"OKAY":
                raise RuntimeError(f"{request}: refused")
        return sock

    @staticmethod
    def _exact(sock: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def close(self) -> None:
        """Close the kept connections (adbd ends the kept `sh`)."""
        for sock in (self._sync, self._shell):
            if sock is not None:
                sock.close()
        self._sync = self._shell = None

    def shell(self, command: str) -> tuple[int, bytes]:
        """Exit status and stderr of `command`, written to the kept `shell,v2:sh` with the
        sentinels hil's kept shell uses (hil/board/kept_shell.py)."""
        if self._shell is None:
            self._shell = self._open("shell,v2:sh")
        sock, tag = self._shell, f"min-{time.monotonic_ns()}"
        script = sentinel_script(command, tag)
        sock.sendall(struct.pack("<BI", 0, len(script)) + script)
        stdout, stderr, marker = b"", b"", tag.encode()
        while not (marker in stdout and stderr.endswith(marker + b"\n")):
            kind, length = struct.unpack("<BI", self._exact(sock, 5))
            data = self._exact(sock, length) if length else b""
            if kind == 1:
                stdout += data
            elif kind == 2:
                stderr += data
            elif kind == 3:
                raise EOFError("the kept shell ended")
        status = int(stdout[stdout.index(marker) + len(marker):].split(b"\n", 1)[0])
        return status, stderr[: -len(marker) - 1]

    def _kept_sync(self) -> socket.socket:
        if self._sync is None:
            self._sync = self._open("sync:")
        return self._sync

    def push(self, files: list[tuple[Path | bytes, str]]) -> None:
        sock = self._kept_sync()
        for local, remote in files:
            spec = f"{remote},{0o100644}".encode()
            data = local if isinstance(local, bytes) else local.read_bytes()
            message = b"SEND" + struct.pack("<I", len(spec)) + spec
            for offset in range(0, len(data), 65536):
                chunk = data[offset : offset + 65536]
                sock.sendall(message + b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                message = b""
            sock.sendall(message + b"DONE" + struct.pack("<I", int(time.time())))
        for _ in files:
            if self._exact(sock, 8)[:4] != b"OKAY":
                raise RuntimeError("push refused")

    def pull(self, remotes: list[str]) -> dict[str, bytes]:
        sock = self._kept_sync()
        found = {}
        for remote in remotes:
            path = remote.encode()
            sock.sendall(b"RECV" + struct.pack("<I", len(path)) + path)
            parts = []
            while True:
                header = self._exact(sock, 8)
                length = struct.unpack("<I", header[4:])[0]
                if header[:4] == b"DATA":
                    parts.append(self._exact(sock, length))
                elif header[:4] == b"DONE":
                    break
                else:
                    raise RuntimeError(f"pull {remote}: {header[:4]!r}")
            found[remote] = b"".join(parts)
        return found

    def case(self, board: AdbBoard, artifact: Artifact, case_dir: str) -> dict[str, float]:
        """The three operations of a case as hil does them; seconds per operation."""
        inputs = [posixpath.join(case_dir, artifact.input_file(i).name) for i in range(len(artifact.inputs))]
        files: list[tuple[Path | bytes, str]] = [(artifact.pte, posixpath.join(case_dir, "model.pte"))]
        files += [(artifact.input_file(i), remote) for i, remote in enumerate(inputs)]
        files += [(data, remote) for data, remote, _mode in folder_markers(case_dir, 1)]
        start = time.perf_counter()
        self.push(files)
        pushed = time.perf_counter()
        chain = board.run_chain(case_dir, inputs, 1, 0, NoiseControl())
        status, stderr = self.shell(device_command(*chain))
        if status != 0:
            raise RuntimeError(f"minimal client: run shell exit {status}: {stderr[-500:]!r}")
        ran = time.perf_counter()
        remotes = [posixpath.join(case_dir, "out", f"output_{i}.bin") for i in range(len(artifact.outputs))]
        remotes.append(posixpath.join(case_dir, "runs", "0", "statistics.txt"))
        self.pull(remotes)
        return {"push": pushed - start, "exec": ran - pushed, "pull": time.perf_counter() - ran}


def suite_cases(suite: str, precision: str = "fp32") -> list[Case]:
    """The fp32 cases of `suite`."""
    return [c for c in load_suite(suite) if c.precision == precision]


def lower(cases: list[Case], cache: ArtifactCache, jobs: int) -> tuple[list[Artifact], int, float]:
    """Artifacts of `cases` (failures dropped), how many were lowered, and the seconds."""
    start = time.perf_counter()
    artifacts: dict[int, Artifact] = {}
    lowered = 0
    with tempfile.TemporaryDirectory() as scratch:
        for result in lower_cases(cases, "xnnpack", "E9955", Path(scratch), cache, jobs):
            lowered += not result.cached
            if result.artifact is not None:
                artifacts[result.index] = result.artifact
    return [artifacts[i] for i in sorted(artifacts)], lowered, time.perf_counter() - start


def upstream_flow(device, artifact: Artifact, out: Path) -> float:
    """The per-test sequence of upstream's EDBTestManager, one adb call per step."""
    start = time.perf_counter()
    wd = UPSTREAM_WORKDIR
    device.shell(device_command(["rm", "-rf", wd]))
    device.shell(device_command(["mkdir", "-p", wd]))
    device.sync.push(artifact.pte, posixpath.join(wd, "model.pte"), mode=0o644)
    device.sync.push(VIRTUAL_RUNNER, posixpath.join(wd, RUNNER_NAME), mode=0o755)
    device.shell(device_command(["ls", wd]))
    names = []
    for i in range(len(artifact.inputs)):
        names.append(f"input_{i}.bin")
        device.sync.push(artifact.input_file(i), posixpath.join(wd, names[-1]), mode=0o644)
    device.shell(device_command(["rm", "-rf", posixpath.join(wd, "output")]))
    device.shell(device_command(["mkdir", posixpath.join(wd, "output")]))
    device.shell(device_command(["chmod", "777", posixpath.join(wd, "output")]))
    result = device.shell2(
        device_command(
            ["cd", wd], ["chmod", "+x", RUNNER_NAME],
            [f"./{RUNNER_NAME}", "--model", "model.pte", "--input", " ".join(names),
             "--output_path", "output"],
        ),
        v2=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"upstream flow: runner exit {result.returncode}: {result.stderr}")
    device.shell(device_command(["ls", posixpath.join(wd, "output")]))
    device.sync.pull_dir(posixpath.join(wd, "output"), out, exist_ok=True)
    return time.perf_counter() - start


def link_minimum(artifact: Artifact, link: str) -> float:
    """bytes / bandwidth + 3 round trips (a service open and four messages each)."""
    profile = LINKS[link]
    up = artifact.pte_bytes + sum(m.nbytes for m in artifact.inputs)
    down = sum(m.nbytes for m in artifact.outputs) + 64  # + statistics.txt
    transfer = (up + down) / profile.bytes_per_s if profile.bytes_per_s else 0.0
    round_trip = profile.open_s + 4 * profile.message_s  # OPEN, OKAY, WRTE, CLSE
    return transfer + 3 * round_trip


def runner_work_s(latency: dict[str, Any] | None) -> float:
    """What the runner itself reports for one invocation: ENN init, load_method, the 1st run
    and the timed runs (warm-ups are untimed: the bench runs none)."""
    if not latency:
        return 0.0
    parts = [latency.get(key) or 0.0 for key in ("init", "load", "first")]
    return (sum(parts) + sum(latency.get("samples") or [])) / 1000.0


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000.0


def board_costs(client: MinimalClient) -> dict[str, float]:
    """The board's own per-exec cost, on an unshaped board (seconds): a command through the
    kept shell (`true`: the subshell and the sentinels) and the runner front
    (`enn_executor_runner --help`: the front's start and its round trip to the executor, which
    prints usage after ENN init) beyond that."""
    start = time.perf_counter()
    client.shell("true")
    shell = time.perf_counter() - start
    start = time.perf_counter()
    client.shell(device_command([RUNNER_PATH, "--help"]))
    return {"shell_command": shell, "runner_front": time.perf_counter() - start - shell}


@dataclasses.dataclass
class _Bench:
    process: VirtualBoardProcess
    device: Any
    board: AdbBoard
    client: MinimalClient


def per_case(artifacts: list[Artifact], link: str, rounds: int, work: Path) -> dict[str, Any]:
    """(a), (b), (c): on one board with `link` and one unshaped, interleaved so that load
    changes hit every contender alike."""
    rows: list[dict[str, Any]] = []
    with AdbServer() as adb:
        benches: dict[str, _Bench] = {}
        try:
            for kind in dict.fromkeys([link, "none"]):
                process = start_virtual_board(work / f"board-{kind}", "E9955", f"bench-{kind}",
                                              ["--link", kind], wait_warm=True)
                device = adb.connect(process.address, timeout=60)
                board = AdbBoard(f"bench-{kind}", process.address, device, "bench", VIRTUAL_RUNNER, 60)
                board.prepare()
                client = MinimalClient(adb.socket_path, process.address)
                benches[kind] = _Bench(process, device, board, client)
            shaped, bare = benches[link], benches["none"]
            for bench in benches.values():  # the first case of a board loads the delegate library
                bench.board.run(artifacts[0], "warm", 1, 0)
            costs: dict[str, list[float]] = {"shell_command": [], "runner_front": []}
            for i, artifact in enumerate(artifacts):
                hil: list[dict[str, float]] = []
                minimal: list[dict[str, float]] = []
                unshaped: list[dict[str, float]] = []
                board: dict[str, list[float]] = {"shell_command": [], "runner_front": []}
                latency = None
                for r in range(rounds):  # every contender in every round: the same load
                    order = ("hil", "min") if r % 2 == 0 else ("min", "hil")
                    for who in order:
                        if who == "hil":  # a fresh slot each time, as a run gives each case
                            execution = shaped.board.run(artifact, f"c{i}h{r}", 1, 0)
                            hil.append(execution.timings_s)
                            latency = execution.latency_ms
                        else:
                            case_dir = posixpath.join(shaped.board.workdir, f"c{i}m{r}")
                            minimal.append(shaped.client.case(shaped.board, artifact, case_dir))
                    case_dir = posixpath.join(bare.board.workdir, f"c{i}u{r}")
                    unshaped.append(bare.client.case(bare.board, artifact, case_dir))
                    for key, seconds in board_costs(bare.client).items():
                        board[key].append(seconds)
                seed = upstream_flow(shaped.device, artifact, work / f"up{i}")
                row: dict[str, Any] = {"case": i, "pte_bytes": artifact.pte_bytes, "upstream_ms": seed * 1000}
                for name, series in (("hil", hil), ("min", minimal), ("bare", unshaped)):
                    for part in ("push", "exec", "pull"):
                        row[f"{name}_{part}_ms"] = median_ms([t[part] for t in series])
                    row[f"{name}_ms"] = median_ms([sum(t.values()) for t in series])
                for key, values in board.items():
                    row[f"{key}_ms"] = median_ms(values)
                    costs[key] += values
                row["runner_ms"] = runner_work_s(latency) * 1000
                row["link_ms"] = link_minimum(artifact, link) * 1000
                row["floor_ms"] = (row["link_ms"] + row["runner_ms"] + row["shell_command_ms"]
                                   + row["runner_front_ms"])
                row["board_floor_ms"] = row["link_ms"] + row["bare_ms"]
                rows.append(row)
        finally:
            for bench in benches.values():
                bench.client.close()
                bench.process.stop()
    board_ms = {f"{key}_ms": round(median_ms(values), 2) for key, values in costs.items()}
    return {"rows": rows, "board": board_ms}


def breakdown_table(rows: list[dict[str, Any]]) -> str:
    """Where a case's time goes (medians over the cases), hil beside the minimal client."""
    def med(key: str) -> float:
        return statistics.median(row[key] for row in rows)

    lines = [
        "| where a case's time goes (ms, median over cases) | hil | minimal client |",
        "| --- | ---: | ---: |",
        f"| push (the kept sync connection) | {med('hil_push_ms'):.1f} | {med('min_push_ms'):.1f} |",
        f"| exec (the kept shell: state read, runner invocation) | {med('hil_exec_ms'):.1f} | "
        f"{med('min_exec_ms'):.1f} |",
        f"|   of which the runner's own work (its statistics) | {med('runner_ms'):.1f} | same |",
        f"|   of which a kept-shell command (`true`, unshaped) | {med('shell_command_ms'):.1f} | same |",
        f"|   of which the runner front (unshaped) | {med('runner_front_ms'):.1f} | same |",
        f"| pull (the kept sync connection) | {med('hil_pull_ms'):.1f} | {med('min_pull_ms'):.1f} |",
        f"| total | {med('hil_ms'):.1f} | {med('min_ms'):.1f} |",
        f"| link minimum (bytes / bandwidth + 3 round trips) | {med('link_ms'):.1f} | |",
        f"| floor = link minimum + runner + shell command + front | {med('floor_ms'):.1f} | |",
        f"| the minimal client's case on an unshaped board (all the board's work) | | {med('bare_ms'):.1f} |",
        f"| board floor = link minimum + that | {med('board_floor_ms'):.1f} | |",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="ops", help="suite to measure (default: ops)")
    parser.add_argument("--link", default="usb2", choices=sorted(LINKS))
    parser.add_argument("--cases", type=int, default=10, help="op cases for (a)-(c)")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions per case and contender")
    parser.add_argument("--scaling-cases", type=int, default=40, help="cases for (d)")
    parser.add_argument("--jobs", type=int, default=2, help="lowering workers for (e)")
    parser.add_argument("--offhost-per-board", type=int, default=8,
                        help="(f): measured cases per board (default: 8)")
    parser.add_argument("--offhost-device-time", default="1000",
                        help="(f): the off-host mode's ms per execution, or measured (default: 1000)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="hil-bench-") as tmp:
        work = Path(tmp)
        cases = suite_cases(args.suite)
        cache = ArtifactCache(work / "cache")
        _, cold_count, cold_s = lower(cases, cache, args.jobs)
        artifacts, warm_count, warm_s = lower(cases, cache, args.jobs)
        print(f"(e) lowering {len(cases)} cases: cold {cold_s:.1f} s ({cold_count} lowered), "
              f"warm {warm_s:.2f} s ({warm_count} lowered): {warm_s / cold_s:.1%} of cold")

        measured = per_case(artifacts[: args.cases], args.link, args.rounds, work)
        rows, board = measured["rows"], measured["board"]
        print(f"\n(a)-(c) per case on link {args.link}, medians of {args.rounds} rounds:")
        header = ("case", "upstream", "hil", "minimal", "floor", "bfloor", "up/hil", "hil/min", "hil/floor",
                  "hil/bfloor")
        print("{:>4} {:>9} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8} {:>9} {:>10}".format(*header))
        for row in rows:
            print(f"{row['case']:>4} {row['upstream_ms']:>9.1f} {row['hil_ms']:>7.1f} {row['min_ms']:>8.1f} "
                  f"{row['floor_ms']:>7.1f} {row['board_floor_ms']:>7.1f} "
                  f"{row['upstream_ms'] / row['hil_ms']:>6.2f}x {row['hil_ms'] / row['min_ms']:>7.2f}x "
                  f"{row['hil_ms'] / row['floor_ms']:>8.2f}x {row['hil_ms'] / row['board_floor_ms']:>9.2f}x")
        keys = ("upstream_ms", "hil_ms", "min_ms", "floor_ms", "board_floor_ms")
        total = {key: sum(row[key] for row in rows) for key in keys}
        speedup = total["upstream_ms"] / total["hil_ms"]
        vs_minimal = total["hil_ms"] / total["min_ms"]
        overhead = total["hil_ms"] / total["floor_ms"]
        vs_board_floor = total["hil_ms"] / total["board_floor_ms"]
        print(f"sums: upstream/hil {speedup:.2f}x, hil/minimal client {vs_minimal:.2f}x, "
              f"hil/(link minimum + runner + shell command + front) {overhead:.2f}x, "
              f"hil/(link minimum + the minimal client's case on an unshaped board) {vs_board_floor:.2f}x")
        print(f"board per-exec cost (unshaped): kept-shell command {board['shell_command_ms']:.1f} ms, "
              f"runner front {board['runner_front_ms']:.1f} ms")
        print("\n" + breakdown_table(rows))

        many = copies(cases, args.scaling_cases)
        lower_all(many, work / "cache", args.jobs)
        one = board_throughput(many, 1, work / "one", work / "cache", args.link)
        four = board_throughput(many, 4, work / "four", work / "cache", args.link)
        print(f"\n(d) {len(many)} cases on link {args.link}: 1 board {one['cases_per_s']:.1f} cases/s, "
              f"4 boards {four['cases_per_s']:.1f} cases/s: {four['cases_per_s'] / one['cases_per_s']:.2f}x "
              "(rig-bound: the boards run every program on this host)")
        for name, figures in (("1 board", one), ("4 boards", four)):
            print(f"    {name}: CPU per case: hil {figures['hil_cpu_ms']:.1f} ms, boards "
                  f"{figures['board_cpu_ms']:.1f} ms")
        cores = os.cpu_count() or 1
        cpu_per_case = (four["hil_cpu_ms"] + four["board_cpu_ms"]) / 1000
        print(f"    CPU ceiling on {cores} cores: {cores / cpu_per_case:.1f} cases/s")
        print(f"\n(f) off-host mode ({args.offhost_device_time} ms per execution), "
              f"{args.offhost_per_board} cases per board:")
        offhost = offhost_scaling(cases, [1, 4, 16], args.offhost_per_board, args.offhost_device_time,
                                  work / "offhost", work / "cache")
        print(f"    hil CPU per case {offhost['hil_cpu_ms_per_case']:.1f} ms (goal <= 5); "
              f"4 boards {offhost['scaling_4_boards']:.2f}x (goal >= 3.6), "
              f"16 boards {offhost['scaling_16_boards']:.2f}x (goal >= 14); one core of hil feeds "
              f"{offhost['hil_cpu_ceiling_boards_per_core']:.0f} boards "
              f"({offhost['hil_cpu_ceiling_cases_per_s']:.0f} cases/s)")

    figures = {
        "seed_speedup": round(speedup, 3),
        "hil_vs_minimal_client": round(vs_minimal, 3),
        "overhead_vs_link_min": round(overhead, 3),
        "overhead_vs_board_floor": round(vs_board_floor, 3),
        "scaling_4_boards_rig": round(four["cases_per_s"] / one["cases_per_s"], 3),
        **offhost,
        "warm_relower_count": warm_count,
        "warm_vs_cold": round(warm_s / cold_s, 4),
        "board_per_exec_ms": board,
        "breakdown_ms": {key: round(statistics.median(row[key] for row in rows), 2)
                         for key in rows[0] if key.endswith("_ms")},
        "throughput": {"one_board": one, "four_boards": four, "cpu_ceiling_cases_per_s":
                       round(cores / cpu_per_case, 2)},
        "link": args.link,
        "cases": len(rows),
        "rounds": args.rounds,
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()]},
    }
    print("\n" + json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
