"""The hand-written prose of docs/reference/results-json.md, around the fields the schema
gives: how the file is written and read, its rules, its versions, the renderings."""

BEFORE = """\
`results.json` is the record of a run: the JUnit XML, the console table, the GitHub annotations
and step summary, `hil merge` and `hil compare` are renderings of it, and `hil report`
re-renders them from it. Its fields below are generated from its JSON Schema,
`hil/report/results.schema.json` in the installed package (draft 2020-12), which a file can be
validated against: hil writes no field that the schema does not name.

## How it is written

Memory does not grow with the cases and the cost is O(cases) over a run
(`hil/report/writer.py`; the cases live on disk only):

- every finished case, and every change of the `run` fields, is appended at once to the
  journal beside it, `results.json.journal`, one JSON line each (synced to disk at each
  rewrite of results.json): a header line
  `{"journal": "exynos-hil/results", "version": 5, "run": {...}}`, then `{"case": {...}}` and
  `{"run": {changed fields}}` lines;
- `results.json` is rewritten atomically (a temporary file, then `os.replace`; fsync'd at the
  end) when the journal has grown by a quarter since the last rewrite, so it is never more
  than a fifth of the cases behind, and when the run ends, however it ends: complete,
  SIGINT/SIGTERM (`interrupted`), refused, or a failure of hil itself (status left `running`);
  then the journal is removed. The JUnit file is written at the same moments.

So `results.json` is a valid document at every moment, and holds every finished case once the
run has ended in any way but SIGKILL or a power cut. After those, it is the document of its
last rewrite (status `running`) and the journal holds the cases finished since: every reader
(`hil report`, `merge`, `compare`) replays the journal of a `running` document, so
`hil report results.json --junit junit.xml` recovers both files with every finished case (the
replayed `run` says `"recovered_from_journal": true`).

The layout is part of version 4 (`"case_lines": true`): the document is indented by two and
each case is on a line of its own between `  "cases": [` and `  ]`, so a reader can take the
cases one at a time (`hil.report.results.case_texts`). Files without `case_lines` (versions
1-3, or written by other tools) are read whole.
"""

AFTER = """\
## Rules

- A reader ignores the fields it does not know. A new field, a removed one or a changed
  meaning bumps `version`; hil reads every earlier version (1, 2, 3, 4 and 5).
- Numbers are plain JSON numbers; `null` means "not measured" (never 0 as a placeholder).
  Non-finite floats (an SQNR of +inf for identical outputs) are written as `null`.
- `message` never contains a newline; `detail` and `logs.*` are capped at 64 KiB each.
- Two runs of the same board never overlap: their cases' `started`/`finished` intervals are
  disjoint (the lease).

## Versions

- 2 added `latency_ms.{p99, mean, std, cv, unstable, unstable_reasons, cv_limit}`, `memory`
  and `board_state`.
- 3 added `run.planned`, `run.boards[].left_out`, `run.boards[].labgrid`, and `cases[].message`
  naming each board that was out when no board ran a case.
- 4 added `case_lines`, `run.boards[].build` and `run.boards[].flashes` (provisioning) with the
  `reflash` recovery step, `run.boards[].device_time`, `run.capacity_lost` and
  `run.boards[].board_seconds_out`.
- 5 added the build tuple `hil bisect` reads: `run.executorch_git`, `run.packages`,
  `run.suites`, `run.boards[].runner`, and `run.boards[].build` for every board that came up
  (without an inventory `expected_build`: `expected` null, `differed` false); a `hil bisect`
  board run's own file also has `run.bisect`.

## A merged document

`hil merge` writes an ordinary results document whose `run` also has `merged_from` and, when
the inputs are I/N shards and some are missing, `missing_shards`. Its `id` is
`merged-<first input's id>`, `started`/`finished` span all inputs, `status` is `complete` only
when every input is, `command` is the first input's without `--shard`, `boards` unites the
inputs' boards by name (the first entry of a name wins), and `usable_boards` counts the
distinct boards that were usable in any input.

## drift.json

`hil localize --against fp32` (no board) writes `OUT/drift.json` (or `--results PATH`):
`{"case": "...", "drift": {"against": "fp32", "flow": "xnnpack", "floor_db": 20.0, "nodes": 66,
"compared": 66, "output_sqnr_db": 14.9, "first_below_floor": {...} | null, "curve": [...],
"seconds": 40.2}}`: one curve point per op of the quantized graph (its node fields, `fp32_node`,
`sqnr_db`, `max_abs`), its A8W8 value (the dequantized value the next op reads) against the fp32
graph's value of the same op.

## Renderings

- **JUnit XML** (`hil run`, `hil report --junit`, `hil merge --junit`): one `<testsuite>` per
  (suite, precision, board) named `suite.precision@board` (`@no-board` for cases that never
  reached one); classname `suite.precision`, name the case id, `time` the sum of `timings_s`,
  `file`/`line`; `FAIL_*` and `XPASS` give `<failure>`, `ERROR_*` `<error>`, `SKIP` and
  `XFAIL` `<skipped>` with the reason; system-out: board, warnings, latency, memory, board
  state, then the runner, UART and logcat excerpts; testsuite properties: board, chipset,
  flow, versions, SDK, run id, shard, git sha, the board's runner profile, its build
  (`board.build.property`, `.expected`, `.before`, `.after`, `.differed`) and each flash
  (`board.flash.N`).
- **Console** (`hil run`, `hil report`): progress lines while running (a bar on a terminal),
  then one table row per case.
- **GitHub workflow commands** (`hil run` inside GitHub Actions, `hil report --github`): a
  `::group::` per suite.precision with a line per case and the failed cases' details and
  logs; at most 10 `::error` annotations, worst first, at the case's `file`/`line`; at most
  10 `::warning` (PASS_UNDELEGATED); one `::notice` listing the rest.
- **Step summary** (the same, appended to `$GITHUB_STEP_SUMMARY`; `hil report --summary
  PATH`): totals, a table per suite and board, failures with their numbers, localizations,
  known failures, the 10 slowest cases, latency per case, the command to reproduce; always
  under 1 MiB.
- **Comparison** (`hil compare`, [its reference](cli.md#hil-compare)): a row per case,
  regressions first.
"""
