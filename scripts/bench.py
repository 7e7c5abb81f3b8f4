#!/usr/bin/env python3
"""Throughput benchmark of hil on virtual boards (figures, not pass/fail).

One process measures, on the same virtual board and link, and prints a table:
  (a) the upstream Samsung device flow replicated with adbutils vs hil, per op case;
  (b) hil vs the link-limited minimum (bytes / bandwidth + 3 round trips + runner time);
  (c) 1 vs 4 virtual boards on >= 40 cases (board phase only, lowering cached);
  (d) cold vs warm lowering of the ops suite.
`--json FILE` writes the ratios: seed_speedup, overhead_vs_link_min, scaling_4_boards,
warm_relower_count, warm_vs_cold.

Usage: .venv/bin/python scripts/bench.py [--link usb2] [--cases 10] [--json bench.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import posixpath
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hil.adbserver import AdbServer
from hil.board.adb import RUNNER_NAME, AdbBoard, device_command
from hil.board.spec import BoardSpec
from hil.cases import load_suite
from hil.cases.case import Case
from hil.lower.artifact import Artifact
from hil.lower.cache import ArtifactCache
from hil.lower.pool import lower_cases
from hil.run import VIRTUAL_RUNNER, Run, RunOptions
from hil.virtual.launcher import start_virtual_board
from hil.virtual.link import LINKS

UPSTREAM_WORKDIR = "/data/local/tmp/enn-executorch-test"


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


def link_minimum(artifact: Artifact, link: str, runner_s: float) -> float:
    """bytes / bandwidth + 3 round trips + the runner's own time."""
    profile = LINKS[link]
    up = artifact.pte_bytes + sum(m.nbytes for m in artifact.inputs)
    down = sum(m.nbytes for m in artifact.outputs)
    transfer = (up + down) / profile.bytes_per_s if profile.bytes_per_s else 0.0
    round_trip = profile.open_s + 4 * profile.message_s  # OPEN, OKAY, WRTE, CLSE
    return transfer + 3 * round_trip + runner_s


def per_case(artifacts: list[Artifact], link: str, work: Path) -> list[dict[str, float]]:
    """(a) and (b): upstream vs hil on one board with `link`, and runner time unshaped."""
    rows: list[dict[str, float]] = []
    with AdbServer() as adb:
        boards = {}
        for kind in dict.fromkeys([link, "none"]):
            process = start_virtual_board(work / f"board-{kind}", "E9955", f"bench-{kind}",
                                          ["--link", kind])
            device = adb.connect(process.address, timeout=60)
            board = AdbBoard(f"bench-{kind}", process.address, device, "bench", VIRTUAL_RUNNER, 60)
            board.prepare()
            boards[kind] = (process, device, board)
        try:
            for kind in boards:  # warm the executors: the first exec waits for the import
                boards[kind][2].run(artifacts[0], "warm", work / "warm", 1, 0)
            for i, artifact in enumerate(artifacts):
                _, device, board = boards[link]
                seed = upstream_flow(device, artifact, work / f"up{i}")
                execution = board.run(artifact, f"c{i}", work / f"hil{i}", 1, 0)
                hil_s = sum(execution.timings_s.values())
                unshaped = boards["none"][2].run(artifact, f"c{i}", work / f"none{i}", 1, 0)
                minimum = link_minimum(artifact, link, unshaped.timings_s["exec"])
                rows.append({"case": i, "upstream_s": seed, "hil_s": hil_s, "min_s": minimum})
        finally:
            for process, _, _ in boards.values():
                process.stop()
    return rows


def board_throughput(cases: list[Case], boards: int, link: str, work: Path, cache: Path) -> float:
    """(c): cases per second in the board phase of a real `Run` with `boards` virtual boards."""
    finished: list[float] = []
    options = RunOptions(
        cases=tuple(cases), boards=tuple(BoardSpec(virtual=True) for _ in range(boards)),
        flow="xnnpack", chipset="E9955", out_dir=work,
        results_path=work / "results.json", junit_path=work / "junit.xml",
        cache_dir=cache, jobs=1, virtual_link=link,
    )
    records = Run(options, on_record=lambda record: finished.append(time.perf_counter())).execute()
    bad = [r for r in records if r["verdict"] not in ("PASS", "PASS_UNDELEGATED")]
    if bad:
        raise RuntimeError(f"{len(bad)} cases did not pass, e.g. {bad[0]['id']}: {bad[0]['message']}")
    # The span between the first and the last finished case excludes board start-up.
    return (len(finished) - 1) / (finished[-1] - finished[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="ops", help="suite to measure (default: ops)")
    parser.add_argument("--link", default="usb2", choices=sorted(LINKS))
    parser.add_argument("--cases", type=int, default=10, help="op cases for (a) and (b)")
    parser.add_argument("--scaling-cases", type=int, default=40, help="cases for (c)")
    parser.add_argument("--jobs", type=int, default=2, help="lowering workers for (d)")
    parser.add_argument("--json", type=Path, help="write the ratios here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hil-bench-") as tmp:
        work = Path(tmp)
        cases = suite_cases(args.suite)
        cache = ArtifactCache(work / "cache")
        _, cold_count, cold_s = lower(cases, cache, args.jobs)
        artifacts, warm_count, warm_s = lower(cases, cache, args.jobs)
        print(f"(d) lowering {len(cases)} cases: cold {cold_s:.1f} s ({cold_count} lowered), "
              f"warm {warm_s:.2f} s ({warm_count} lowered): {warm_s / cold_s:.1%} of cold")

        rows = per_case(artifacts[: args.cases], args.link, work)
        print(f"\n(a)+(b) per case on link {args.link}:")
        header = ("case", "upstream ms", "hil ms", "minimum ms", "speedup", "vs min")
        print("{:>4} {:>12} {:>8} {:>11} {:>8} {:>7}".format(*header))
        for row in rows:
            print(f"{row['case']:>4} {row['upstream_s'] * 1e3:>12.1f} {row['hil_s'] * 1e3:>8.1f} "
                  f"{row['min_s'] * 1e3:>11.1f} {row['upstream_s'] / row['hil_s']:>7.2f}x "
                  f"{row['hil_s'] / row['min_s']:>6.2f}x")
        speedup = statistics.mean(r["upstream_s"] for r in rows) / statistics.mean(r["hil_s"] for r in rows)
        overhead = statistics.mean(r["hil_s"] for r in rows) / statistics.mean(r["min_s"] for r in rows)
        print(f"mean: upstream/hil {speedup:.2f}x, hil/minimum {overhead:.2f}x")

        many = (cases * (args.scaling_cases // max(len(cases), 1) + 1))[: args.scaling_cases]
        if len(cases) < args.scaling_cases:  # too few cases: copies under new ids, pre-lowered
            many = [dataclasses.replace(c, id=f"{c.id}__{i}") for i, c in enumerate(many)]
            lower(many, cache, args.jobs)
        one = board_throughput(many, 1, args.link, work / "one", work / "cache")
        four = board_throughput(many, 4, args.link, work / "four", work / "cache")
        print(f"\n(c) {len(many)} cases on link {args.link}: 1 board {one:.1f} cases/s, "
              f"4 boards {four:.1f} cases/s: {four / one:.2f}x")

    figures = {
        "seed_speedup": round(speedup, 3),
        "overhead_vs_link_min": round(overhead, 3),
        "scaling_4_boards": round(four / one, 3),
        "warm_relower_count": warm_count,
        "warm_vs_cold": round(warm_s / cold_s, 4),
    }
    print("\n" + json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
