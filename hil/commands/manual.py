"""The help record of every command (hil/commands/help.py): what `hil SUB --help` says above
and below its options, and what docs/reference/cli.md and exit-codes.md are generated from.
A new sub-command adds its record here and to `COMMAND_HELP`; its exit codes are read from
its code, never copied from another command's."""

from __future__ import annotations

from hil.bisect import answers
from hil.commands.help import CommandHelp
from hil.verdict import EXIT_FAILED, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

USAGE = "bad usage, configuration or input: one line `hil: error: ...` naming the flag, file or field"
INTERRUPTED = "interrupted (SIGINT or SIGTERM); what finished is written"
ARGPARSE_USAGE = 2
"""The exit code of bad usage in a parser that is plain argparse (devicefarm-cli: upstream's
scripts call it), not hil's (3)."""

RUN = CommandHelp(
    name="run",
    summary="lower cases, run them on boards, report",
    description="""
        Lower the selected cases (ops, models, your manifests) with ExecuTorch, run them on
        boards (real ones through adb, or virtual ones, which run ExecuTorch's host runtime
        and say VIRTUAL), compare every output with the host reference and report: the
        console table, OUT/junit.xml, OUT/results.json and, inside GitHub Actions, groups,
        annotations and the step summary.

        Bad input stops it before anything runs (exit 3). results.json and JUnit are valid
        at every moment, also after an interruption.""",
    examples=(
        "hil run --suite smoke --board virtual",
        "hil run --suite ops --precision all --inventory lab.yaml --shard 1/4 --out shard1",
    ),
    exit_codes=(
        (EXIT_OK, "every case passed (PASS, PASS_UNDELEGATED, SKIP and XFAIL count as passed), "
                  "or the shard had no case"),
        (EXIT_FAILED, "a test failed: a FAIL_* verdict, or XPASS"),
        (EXIT_INFRA, "infrastructure errors (ERROR_INFRA, ERROR_INTERNAL) and no test failure, "
                     "or no usable board"),
        (EXIT_USAGE, USAGE + "; also a run refused before lowering (a flow no board's runner "
                     "can execute)"),
        (EXIT_INTERRUPTED, INTERRUPTED),
    ),
)

LOCALIZE = CommandHelp(
    name="localize",
    summary="find the first op a board computes wrong in one failing case (graph bisection), "
            "or with --against fp32 where A8W8 loses the model (host only)",
    description="""
        Takes one case: --suite and --filter (required) must pick exactly one, at one
        --precision (fp32 or a8w8). On a board it runs the case as hil run does; when the case
        ends FAIL_MISMATCH it bisects the graph on that board, cutting it after ops and
        running each cut, until it names the first op whose value is out of tolerance (at
        most ceil(log2 N) + 2 board runs for N ops). The finding is printed, written to the
        case's `localization` in OUT/results.json, and leads its JUnit failure and its
        GitHub annotation.

        With --against fp32 no board is used: the case's A8W8 graph is walked against its
        fp32 graph on the host, and the ops whose SQNR falls below --sqnr-floor are named
        (OUT/drift.json, --plot draws the curve).

        It writes to its own folder (--out, default hil-localize), never over a run's.""",
    examples=(
        "hil localize --suite cases.yaml --filter resnet_block --inventory lab.yaml --board e9955-a",
        "hil localize --suite models --filter mobilenet_v3_small --against fp32 --plot sqnr.png",
    ),
    exit_codes=(
        (EXIT_OK, "--against fp32 wrote its curve; or the case is a known FAIL_MISMATCH (XFAIL) "
                  "and was localized"),
        (EXIT_FAILED, "the case failed FAIL_MISMATCH and was localized (the finding is in "
                      "results.json)"),
        (EXIT_INFRA, "the case ended in an infrastructure error (not localized), or no usable "
                     "board"),
        (EXIT_USAGE, USAGE + "; also: no case or more than one matches, or the case passed or "
                     "failed otherwise than FAIL_MISMATCH (nothing to bisect)"),
        (EXIT_INTERRUPTED, INTERRUPTED),
    ),
)

LOWER = CommandHelp(
    name="lower",
    summary="lower cases to artifacts only (no board)",
    description="""
        Export, quantize (A8W8) and lower the selected cases to .pte files with their inputs
        and host reference outputs, one folder per case under --out; no board is used. Flow
        auto is enn when the LITECORE SDK can lower here, else xnnpack. A case that says
        `skip:`, or fails as its `expect:` says, does not fail it.""",
    examples=(
        "hil lower --suite smoke --out artifacts",
        "hil lower --suite ops --filter 'conv*' --precision a8w8 --flow enn --out artifacts",
    ),
    exit_codes=(
        (EXIT_OK, "every case lowered (or was skipped, or failed as expected)"),
        (EXIT_FAILED, "a case failed to lower (FAIL_EXPORT, FAIL_QUANTIZE, FAIL_LOWER) or hil "
                      "failed on it (ERROR_*)"),
        (EXIT_USAGE, USAGE + "; also: no case matches"),
        (EXIT_INTERRUPTED, "interrupted"),
    ),
)

LIST = CommandHelp(
    name="list",
    summary="list the cases a selection picks (nothing is lowered or run)",
    description="""
        Print the cases --suite, --precision, --filter, --tag, --exclude and --shard pick,
        one line each (suite.precision.id, tags, skip reason or known failure), then their
        count. Use it to check a selection before a run.""",
    examples=(
        "hil list --suite ops --tag 'op:conv*'",
        "hil list --suite smoke --precision all --shard 2/3",
    ),
    exit_codes=(
        (EXIT_OK, "the cases are listed"),
        (EXIT_USAGE, USAGE + "; also: no case matches"),
    ),
)

REPORT = CommandHelp(
    name="report",
    summary="re-render JUnit and the table from results.json",
    description="""
        Read a run's results.json (replaying its journal when the run was killed before its
        end) and render it again: the console table, and on request JUnit XML, the Markdown
        step summary and GitHub workflow commands. A run that never finished is reported
        with the cases that did not run, and never exits 0.""",
    examples=(
        "hil report hil-out/results.json --junit junit.xml --summary summary.md",
        "hil report hil-out/results.json --github",
    ),
    exit_codes=(
        (EXIT_OK, "the run passed"),
        (EXIT_FAILED, "a test failed"),
        (EXIT_INFRA, "infrastructure errors and no test failure, or the run never finished "
                     "(status running or interrupted: the cases that did not run are listed)"),
        (EXIT_USAGE, "a missing, unreadable or invalid results.json (the field is named), or "
                     "an output that cannot be written"),
    ),
)

MERGE = CommandHelp(
    name="merge",
    summary="merge the results.json of shards into one",
    description="""
        Merge the results.json of the shards of one run (--shard I/N) into one document with
        every case, the boards of all and the span of all; optionally its JUnit. A missing
        shard is named and fails the merge's exit code, but the merge is written all the
        same.""",
    examples=(
        "hil merge shard1/results.json shard2/results.json --out results.json --junit junit.xml",
    ),
    exit_codes=(
        (EXIT_OK, "the merged run passed"),
        (EXIT_FAILED, "a test failed"),
        (EXIT_INFRA, "infrastructure errors and no test failure, or a shard is missing (merged "
                     "all the same)"),
        (EXIT_USAGE, "an unreadable or invalid input, inputs that are not shards of one run, or "
                     "an output that cannot be written"),
    ),
)

COMPARE = CommandHelp(
    name="compare",
    summary="latency and accuracy regressions between runs",
    description="""
        Compare NEW against BASE case by case and print a Markdown table, regressions first.
        A latency regression needs the p50 to grow by more than --threshold and
        --min-delta-ms, and both runs' samples to differ significantly (Mann-Whitney U, p <
        0.01). An accuracy regression is a case that passed in BASE and fails in NEW, or an
        output whose max abs error grew beyond the threshold or whose SQNR dropped by more
        than 3 dB. Cases of BASE missing from NEW fail the comparison unless --allow-missing.
        With --plot, MORE files join a latency trend plot ordered by each run's start.""",
    examples=(
        "hil compare base/results.json new/results.json",
        "hil compare mon.json tue.json wed.json --plot trend.png --threshold 5%",
    ),
    exit_codes=(
        (EXIT_OK, "no regression and no case of BASE missing"),
        (EXIT_FAILED, "a latency or accuracy regression, or cases of BASE missing from NEW "
                      "(--allow-missing accepts those)"),
        (EXIT_USAGE, "an unreadable or invalid results file, a bad --threshold or "
                     "--min-delta-ms, MORE files without --plot, an unwritable --plot"),
    ),
)

DASHBOARD = CommandHelp(
    name="dashboard",
    summary="a static page over many nights' results.json (open OUT/index.html from disk)",
    description="""
        Read the results.json of many nights, chipsets, flows and precisions and write one
        self-contained OUT/index.html: a night per column, a case per row, verdicts,
        latency trends and the latency regressions hil compare would flag. It needs no
        server and no network.""",
    examples=(
        "hil dashboard nights/*/results.json --out dashboard",
    ),
    exit_codes=(
        (EXIT_OK, "the page is written"),
        (EXIT_USAGE, "an unreadable or invalid results file (named), a bad --threshold or "
                     "--min-delta-ms, an unwritable --out"),
    ),
)

BOARDS = CommandHelp(
    name="boards",
    summary="list the boards; --check: preflight them",
    description="""
        Reach every board of --inventory or --board (starting virtual ones, taking no lease:
        a board another run holds can be looked at) and print one row per board: state,
        chipset, console, problems, and the adb servers used. Without --check only
        reachability and identity are checked; --check runs the full preflight a run does
        (chipset, aarch64, free space, ENN vendor library, runner, console).

        With --labgrid HOST:PORT (or $LG_COORDINATOR and neither --inventory nor --board) it
        lists the coordinator's places instead: tags, holder, whether the holder still runs,
        reservation.""",
    examples=(
        "hil boards --board virtual:2",
        "hil boards --inventory lab.yaml --check --chipset E9955",
        "hil boards --labgrid 127.0.0.1:20408",
    ),
    exit_codes=(
        (EXIT_OK, "every board answered and has no problem (or the places are listed)"),
        (EXIT_INFRA, "a board has a problem, with or without --check: unreachable, its "
                     "identity unreadable, another chipset than the inventory says (and with "
                     "--check any preflight problem); or the labgrid coordinator cannot be "
                     "reached"),
        (EXIT_USAGE, USAGE),
    ),
)

FLASH = CommandHelp(
    name="flash",
    summary="flash the inventory's known-good images on boards (fastboot), then check their build",
    description="""
        For each chosen board of the inventory that has `images`: take its lease, reboot it
        into its bootloader, check the product, flash every image with fastboot, reboot, wait
        for adb and check that the board reports its `expected_build`. Boards are flashed in
        parallel; each step of each board is printed with its time. --if-needed leaves a
        board already at its expected build alone.""",
    examples=(
        "hil flash --inventory lab.yaml --if-needed",
        "hil flash --inventory lab.yaml --board e9955-a --flash-timeout 600",
    ),
    exit_codes=(
        (EXIT_OK, "every chosen board is flashed and at its expected build (or, with "
                  "--if-needed, already was)"),
        (EXIT_INFRA, "a board's flash failed (its failed step is named) or its lease could not "
                     "be had"),
        (EXIT_USAGE, USAGE + "; also: a board without images, an image file missing or empty"),
        (EXIT_INTERRUPTED, "interrupted"),
    ),
)

DOCTOR = CommandHelp(
    name="doctor",
    summary="SDK, adb, ExecuTorch, runner, bwrap, docker: found / missing / how to fix",
    description="""
        Check what this machine (or image) has for hil, one line per component: ok, missing
        (not needed for what you asked) or MISSING (required), and for each missing one how to
        fix it. Nothing is started or installed. By default executorch, adb and bwrap are
        required (what hil run --board virtual needs); --require names others (sdk and
        enn-wrapper for flow enn, runner for real boards, docker for hil replicate).""",
    examples=(
        "hil doctor",
        "hil doctor --require sdk,enn-wrapper,runner --runner /opt/enn/enn_executor_runner",
    ),
    exit_codes=(
        (EXIT_OK, "every required component is ok"),
        (EXIT_USAGE, "a required component is not ok (named on stderr), or an unknown "
                     "--require name"),
    ),
)

REPLICATE = CommandHelp(
    name="replicate",
    summary="run hil in its container as CI does (--print: the docker run command)",
    description="""
        Build hil's image from this checkout (tagged by its content; skipped when present)
        and run hil inside it exactly as the GitHub Action does: the same mounts, user, board
        access and environment. Give hil's arguments after `--`, or --from a results.json to
        replay the command a CI run recorded. --print prints the docker run command instead.""",
    examples=(
        "hil replicate -- run --suite smoke --board virtual",
        "hil replicate --from ci-artifacts/results.json --access host-adb",
        "hil replicate --print --image exynos-hil:host -- run --suite smoke",
    ),
    exit_codes=(
        (EXIT_OK, "--print or --build-only done; otherwise hil in the container exited 0"),
        (EXIT_FAILED, "hil in the container exited 1 (its exit code is passed on: 2, 3 and 130 "
                      "likewise)"),
        (EXIT_INFRA, "docker failed (no engine, the build failed), or hil in the container "
                     "exited 2"),
        (EXIT_USAGE, USAGE + "; or hil in the container exited 3"),
        (EXIT_INTERRUPTED, "interrupted, or hil in the container was"),
    ),
)

VIRTUAL_BOARD = CommandHelp(
    name="virtual-board",
    summary="run a virtual Exynos board (adb device side)",
    description="""
        Run one virtual Exynos board on 127.0.0.1 until SIGTERM or SIGINT: the device side
        of the adb protocol (connect it with `adb connect 127.0.0.1:PORT`), a fastboot
        bootloader, a UART on a pty, and a runner that executes .pte files with ExecuTorch's
        host runtime under the contract of enn_executor_runner. It is not an NPU: every
        result it gives says VIRTUAL. It prints `hil-virtual-board ready 127.0.0.1:PORT ...`
        once it listens and `hil-virtual-board warm` once its runtime is loaded. --fault
        injects the failures real boards have (drops, freezes, crashes, hangs).""",
    examples=(
        "hil virtual-board --port 47001 --chipset E9965",
        "hil virtual-board --fault drop,on=push --console /tmp/uart",
    ),
    exit_codes=(
        (EXIT_OK, "stopped by SIGTERM or SIGINT"),
        (EXIT_INFRA, "the board could not start (e.g. its port is taken)"),
        (EXIT_USAGE, USAGE),
    ),
)

DEVICEFARM_CLI = CommandHelp(
    name="devicefarm-cli",
    summary="upstream ExecuTorch's Samsung tests reach one board of the lab through it",
    description="""
        The command upstream ExecuTorch's Samsung tests call to use a board
        (backends/samsung/test/utils/runtime_executor.py), served by hil: -Q holds the board
        HIL_BOARD names (a serial, HOST:PORT, an inventory name with HIL_INVENTORY, a labgrid
        place, or virtual) for the session HIL_DEVICEFARM_SESSION, in a holder process that
        keeps its lease; -C says whether it is assigned; -E, -U and -D run, push and pull
        through it; -d gives it back.""",
    examples=(
        "devicefarm-cli -Q",
        "devicefarm-cli -C",
        "devicefarm-cli -E ls /data/local/tmp",
        "devicefarm-cli -d",
    ),
    exit_codes=(
        (EXIT_OK, "done (-Q: also when no board can be held, which the next -C reports; -C: "
                  "`assigned BOARD` or `waiting (why)`); -E exits with the board command's own "
                  "status instead"),
        (EXIT_FAILED, "one line `devicefarm-cli: ...` on stderr: no board assigned, a missing "
                      "file, the board or its holder failed, an -E command stopped past "
                      "HIL_DEVICEFARM_TIMEOUT_S; -C: `unavailable: why`"),
        (ARGPARSE_USAGE, "bad usage (argparse: none or several of -Q -C -E -U -D -d)"),
    ),
)

BISECT = CommandHelp(
    name="bisect",
    summary="find the first bad firmware build, runner commit or Python-side build between a "
            "good and a bad run",
    description="""
Find the first bad firmware build, runner commit or Python-side build between two results
files (a good night and a bad one) on the lab's own boards. Confirms the regression first
(the good and the bad builds, three times each, interleaved on one board), isolates the
factor whose change alone reproduces it, searches its candidates with every usable board
(B boards test B candidates a round), then confirms the culprit (it fails three times, its
parent passes three times; latency: significantly slower by half the regression).

Wrong numbers take one run per candidate; latency is judged by Mann-Whitney and
Kolmogorov-Smirnov on fresh runner launches. The state lives in --out: after an interruption
(even kill -9) the same command goes on without repeating a completed run. Writes
OUT/bisect.json, bisect.md, bisect.png and each board run's results.json under OUT/runs/.
""",
    examples=(
        "hil bisect --good nights/11-20/results.json --bad nights/11-21/results.json "
        "--inventory lab/boards.yaml --firmware-builds /srv/firmware --out hil-bisect",
        "hil bisect --good good.json --bad bad.json --board virtual:3 --runner-repo ~/executorch "
        "--runner-build 'scripts/build-runner.sh' --filter 'ops.fp32.conv*'",
    ),
    exit_codes=tuple(sorted({**answers.MEANINGS, EXIT_USAGE: USAGE}.items())),
)

COMMAND_HELP: dict[str, CommandHelp] = {
    record.name: record
    for record in (RUN, LOCALIZE, LOWER, LIST, REPORT, MERGE, COMPARE, DASHBOARD, BOARDS,
                   FLASH, BISECT, DOCTOR, REPLICATE, VIRTUAL_BOARD)
}
"""Every `hil` sub-command's record, in the order `hil --help` lists them."""
SCRIPTS: dict[str, CommandHelp] = {DEVICEFARM_CLI.name: DEVICEFARM_CLI}
"""The console scripts besides `hil` with a record of their own."""
