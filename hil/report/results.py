"""The results document of a run: its schema, how it is written (streamed, one case per
line) and read back (whole by `load_results`, case by case by `CaseStream`); also the small
text helpers its renderings share (capping, cleaning). The run's writer, which keeps the
document's cases on disk only (the journal), is hil/report/writer.py.

The layout `write_document` writes (and version 4 declares with `case_lines: true`): the
document indented by two, each case on a line of its own between `"cases": [` and `]`, so
a reader can take the cases one at a time (`case_texts`) and a run's memory does not grow
with its cases.
"""

from __future__ import annotations

import itertools
import json
import math
import numbers
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from hil.errors import UsageError
from hil.verdict import Verdict

SCHEMA = "exynos-hil/results"
VERSION = 5
"""The version written. 2: `latency_ms` carries p99, mean, std, cv and the stability verdict,
cases carry `memory` and `board_state`; 4: boards carry `build` and `flashes` (provisioning),
`run.boards[].device_time` (a virtual board in the off-host measuring mode) and `case_lines`
(true when each case is on a line of its own: see the module docstring), `run.capacity_lost`
and each board record's `board_seconds_out` (the capacity lost to recovery); 5: the build
tuple `hil bisect` reads: `run.executorch_git`, `run.packages`, `run.suites`, every board's
`build` (expected or not) and `runner`; all optional (hil/report/results.schema.json)."""
READABLE_VERSIONS = (1, 2, 3, 4, 5)
"""Versions `load_results` accepts: version 1 records read back with the numbers they have."""
TEXT_CAP_BYTES = 64 * 1024
"""Cap of `detail`, of every `logs.*` entry and of a JUnit system-out (UTF-8 bytes)."""
JOURNAL_SUFFIX = ".journal"
"""The journal is the results file's path with this appended."""
FINAL_STATUSES = ("complete", "interrupted", "refused")
"""How a run ended: every case ran; SIGINT/SIGTERM; or refused before lowering (bad usage,
e.g. a flow some board's runner cannot execute: exit 3)."""
VIRTUAL_NOTE = "VIRTUAL: ExecuTorch host runtime, no NPU"

_CONTROL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-_])"  # ANSI escape sequences
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # other control characters except \t and \n
)


def utc_now() -> str:
    """The current time as ISO 8601 UTC, e.g. `2026-11-30T03:35:00Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cap_text(text: str, limit: int = TEXT_CAP_BYTES) -> str:
    """`text` if its UTF-8 form fits in `limit` bytes; else its head and (longer) tail around
    a line saying how many bytes were cut, the whole within `limit` bytes."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    budget = limit - 64  # room for the marker line
    head = budget // 4
    tail = budget - head
    marker = f"\n[... {len(data) - head - tail} bytes cut by hil ...]\n"
    return data[:head].decode("utf-8", "ignore") + marker + data[-tail:].decode("utf-8", "ignore")


def clean_text(text: str) -> str:
    """`text` without ANSI escape sequences and control characters other than tab and newline."""
    return _CONTROL.sub("", text)


def one_line(text: str) -> str:
    """`text` with its line breaks (and the blanks around them) folded into single spaces."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def describe_board(run: dict[str, Any], name: str | None) -> str:
    """The board's name, marked VIRTUAL when the run's inventory says so."""
    if name is None:
        return "none (never reached a board)"
    for board in run.get("boards") or []:
        if board.get("name") == name and board.get("virtual"):
            device_time = board.get("device_time")
            offhost = f"; off-host mode, device time {device_time}" if device_time else ""
            return f"{name} ({VIRTUAL_NOTE}{offhost})"
    return name


def sanitise(value: Any) -> Any:
    """A JSON-ready copy of `value`: non-finite floats become None, tuples lists, numeric
    scalars (numpy's too) plain int/float; anything else not JSON-able is left for json to
    reject."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # the common cases first: the ABC checks below cost a case ~1 ms
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): sanitise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitise(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """Replace `path` by `text` (UTF-8) so that a reader sees the old or the new file, whole
    (see `atomic_writer`)."""
    with atomic_writer(path, durable) as stream:
        stream.write(text)


@contextmanager
def atomic_writer(path: Path, durable: bool = True) -> Iterator[TextIO]:
    """A text stream whose content replaces `path` (UTF-8) when the block ends without an
    error, so that a reader sees the old or the new file, whole: a temporary file in the
    same folder, `os.replace`; on an error `path` is left as it was. `durable`: fsync the
    file before and the folder after, so that it survives a power cut too; a run's rewrites
    at checkpoints skip that (about 10 ms per file on ext4: `scripts/bench.py`), since the
    rename alone survives the process being killed, and the run's last writes are durable."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            yield stream
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        tmp.chmod(0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable and os.name == "posix":
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def totals(cases: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Verdict name -> count, non-zero only, in the Verdict enum's order."""
    return ordered_totals(Counter(case["verdict"] for case in cases))


def ordered_totals(counts: Counter[str]) -> dict[str, int]:
    """`counts` (verdict name -> count) as the document's `totals`: non-zero only, in the
    Verdict enum's order."""
    return {v.value: counts[v.value] for v in Verdict if counts[v.value]}


SEVERITY = (
    Verdict.FAIL_RUN,
    Verdict.FAIL_MISMATCH,
    Verdict.FAIL_LOAD,
    Verdict.FAIL_LOWER,
    Verdict.FAIL_QUANTIZE,
    Verdict.FAIL_EXPORT,
    Verdict.XPASS,
    Verdict.ERROR_INTERNAL,
    Verdict.ERROR_INFRA,
)
"""Bad verdicts, worst first: the model crashing or computing wrong numbers on the board
before it failing to lower, a known failure that went away (XPASS: its expectation is stale),
and test failures before errors of hil or of the infrastructure."""


def case_key(case: dict[str, Any]) -> str:
    """`suite.precision.id`, unique within a run."""
    return f"{case['suite']}.{case['precision']}.{case['id']}"


INCOMPLETE_STATUSES = ("running", "interrupted")
"""A run with one of these statuses never reached its end: some planned cases did not run."""


def not_run(results: dict[str, Any]) -> list[str] | None:
    """The planned cases (`suite.precision.id`) a run has no record of, in plan order; None
    when the document does not say what was planned (results of an older hil)."""
    planned = results.get("run", {}).get("planned")
    if planned is None:
        return None
    done = {case_key(case) for case in results.get("cases") or []}
    return [key for key in planned if key not in done]


def incomplete_line(results: dict[str, Any], limit: int = 10) -> str | None:
    """One line saying that the run never finished and what did not run, or None."""
    status = results.get("run", {}).get("status")
    if status not in INCOMPLETE_STATUSES:
        return None
    why = "it never finished: killed or the machine stopped" if status == "running" else "it was interrupted"
    missing = not_run(results)
    if missing == []:  # every planned case has its record: only the run's end was lost
        return None
    if missing is None:
        return f"incomplete run (status {status}: {why}); which cases did not run is not recorded"
    planned = len(results["run"]["planned"])
    shown = ", ".join(missing[:limit]) + (f" and {len(missing) - limit} more" if len(missing) > limit else "")
    return (f"incomplete run (status {status}: {why}): {len(missing)} of {planned} planned "
            f"case(s) did not run" + (f": {shown}" if missing else ""))


def worst_abs_error(case: dict[str, Any]) -> float | None:
    """The largest `max_abs` over the case's outputs, None when none was measured."""
    errors = [o["max_abs"] for o in case.get("outputs") or [] if isinstance(o.get("max_abs"), (int, float))]
    return max(errors, default=None)


def severity_rank(index: int, case: dict[str, Any]) -> tuple[int, float, int, int] | None:
    """Where the case at `index` (in results order) stands among the failed and errored
    ones (lower is worse: see `worst_first`); None when it passed, was skipped or XFAIL."""
    verdict = Verdict(case["verdict"])
    if verdict not in SEVERITY:
        return None
    error = worst_abs_error(case)
    # an error of a case that ran on a board (the root cause: the board that died under it)
    # before the cases no board ever took afterwards
    never_attempted = int(not case.get("board"))
    return (SEVERITY.index(verdict), -(error if error is not None else 0.0), never_attempted, index)


def worst_first(cases: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed and errored cases ordered by SEVERITY, mismatches by their largest abs
    error (largest first), cases a board ran before those none took; otherwise in results
    order."""
    ranked = ((severity_rank(index, case), case) for index, case in enumerate(cases))
    bad = [(rank, case) for rank, case in ranked if rank is not None]
    return [case for _, case in sorted(bad, key=lambda item: item[0])]


_CASES_SLOT = "\0cases\0"
_CASES_OPEN = '  "cases": ['
"""The line that opens the cases in a document with `case_lines` (`"cases": []` when none)."""
_CASES_CLOSE = "  ]"


def write_document(path: Path, run: dict[str, Any], case_texts: Iterable[str],
                   counts: dict[str, int], durable: bool = True) -> None:
    """Write a results document atomically (`atomic_writer`) from `case_texts`, each case's
    JSON text (`json.dumps` of the record as stored) in order, taken one at a time: each
    on a line of its own (`case_lines`); `counts` are its `totals`."""
    document = {"schema": SCHEMA, "version": VERSION, "case_lines": True, "run": run,
                "cases": _CASES_SLOT, "totals": counts}
    # the indented frame by json's pure-Python indenting encoder, the cases (most of the
    # bytes) by its C encoder, one line each
    before, after = json.dumps(document, indent=2, allow_nan=False).split(json.dumps(_CASES_SLOT), 1)
    with atomic_writer(path, durable) as stream:
        stream.write(before)
        separator = "[\n    "
        for text in case_texts:
            stream.write(separator)
            stream.write(text)
            separator = ",\n    "
        stream.write("[]" if separator == "[\n    " else "\n" + _CASES_CLOSE)
        stream.write(after + "\n")


def case_text(case: dict[str, Any]) -> str:
    """A stored case record as its line of the document."""
    return json.dumps(case, allow_nan=False)


def case_texts(path: Path) -> Iterator[str]:
    """The JSON text of each case of the results file at `path`, in order: read a line at a
    time when it has `case_lines`, else (a file of an older hil, or not written by hil)
    parsed whole. OSError when it cannot be read, ValueError when it is not such a file."""
    with Path(path).open(encoding="utf-8") as stream:
        if '  "case_lines": true,\n' not in list(itertools.islice(stream, 4)):
            yield from (case_text(case) for case in _whole_cases(path))
            return
        for line in stream:
            if line == _CASES_OPEN + "\n":
                break
            if line.startswith('  "cases": []'):
                return
        for line in stream:
            if line.startswith(_CASES_CLOSE) and not line.startswith("    "):
                return
            text = line.rstrip("\n")
            yield text[4:-1] if text.endswith(",") else text[4:]
    raise ValueError(f"{path}: the cases end early (a torn file)")


def _whole_cases(path: Path) -> list[dict[str, Any]]:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    cases = document.get("cases") if isinstance(document, dict) else None
    if not isinstance(cases, list):
        raise ValueError(f"{path}: not a results document")
    return cases


class CaseStream:
    """The cases of a run read again from disk at each iteration, a case at a time (e.g.
    `CaseStream(lambda: case_texts(path), count)`): a run's cases without holding them in
    memory. `len` is `count`, so it stands where renderings expect a document's list."""

    def __init__(self, texts: Callable[[], Iterable[str]], count: int) -> None:
        self._texts = texts
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for text in self._texts():
            yield json.loads(text)


def journal_path(path: Path) -> Path:
    """The journal of the results file at `path`."""
    return path.with_name(path.name + JOURNAL_SUFFIX)


def replay_journal(path: Path) -> dict[str, Any] | None:
    """The document a journal records (every case it holds), or None when there is no
    journal or its first line is not a journal header. A torn last line (the writer was
    killed in the middle of it) is left out."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return None
    entries = []
    for number, raw in enumerate(lines):
        try:
            entries.append(json.loads(raw))
        except ValueError:
            if number == len(lines) - 1:
                break
            raise UsageError(f"{path}: line {number + 1} is not valid JSON") from None
    header = entries[0] if entries else {}
    if (not isinstance(header, dict) or header.get("journal") != SCHEMA
            or header.get("version") not in READABLE_VERSIONS or not isinstance(header.get("run"), dict)):
        return None
    run = dict(header["run"])
    cases = []
    for number, entry in enumerate(entries[1:], start=2):
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: line {number} is not a journal entry")
        if "case" in entry:
            cases.append(entry["case"])
        elif "run" in entry:
            run.update(entry["run"])
    run["recovered_from_journal"] = True
    return {"schema": SCHEMA, "version": VERSION, "run": run, "cases": cases, "totals": totals(cases)}


def save_results(document: dict[str, Any], path: Path) -> None:
    """Write a whole results document (e.g. a merge) atomically, its totals recounted."""
    run = sanitise(document["run"])
    counts: Counter[str] = Counter(case["verdict"] for case in document["cases"])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_document(path, run, (case_text(sanitise(case)) for case in document["cases"]),
                   ordered_totals(counts))


_OBJECT_LIST = (list, dict)
"""A list whose items must be objects."""
_NUMBER = (int, float)
"""A number (an int or a float, not a boolean)."""
RUN_FIELD_TYPES: dict[str, Any] = {
    "boards": _OBJECT_LIST, "command": list, "usable_boards": int, "shard": str, "id": str,
    "status": str, "flow": str, "chipset": str, "virtual": bool, "merged_from": _OBJECT_LIST,
    "planned": list, "missing_shards": list, "capacity_lost": dict,
    "executorch_git": str, "packages": dict, "suites": dict,
}
"""The types of the run fields the renderings read (None is allowed for each)."""
CAPACITY_FIELD_TYPES: dict[str, Any] = {
    "board_seconds_out": _NUMBER, "board_seconds": _NUMBER, "fraction": _NUMBER,
}
"""The types of `run.capacity_lost`'s fields (summed by `hil merge`)."""
CASE_FIELD_TYPES: dict[str, Any] = {
    "attempts": int, "board": str, "delegation": dict, "latency_ms": dict, "logs": dict,
    "outputs": _OBJECT_LIST, "timings_s": dict, "message": str, "memory": dict,
    "board_state": dict, "checker": dict, "expected": dict, "localization": dict,
    "earlier_attempts": _OBJECT_LIST, "tags": list, "actual_verdict": str, "detail": str,
}
"""The types of the case fields the renderings read (None is allowed for each)."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _check_types(path: Path, where: str, record: dict[str, Any], types: dict[str, Any]) -> None:
    """UsageError naming the first field of `record` whose type is not the expected one."""
    names = {list: "a list", dict: "an object", str: "a string", int: "a number",
             bool: "a boolean", _OBJECT_LIST: "a list of objects", _NUMBER: "a number"}
    for name, expected in types.items():
        value = record.get(name)
        if value is None:
            continue
        if expected is _OBJECT_LIST:
            good = isinstance(value, list) and all(isinstance(item, dict) for item in value)
        elif expected is int or expected is _NUMBER:
            good = isinstance(value, expected) and not isinstance(value, bool)
        else:
            good = isinstance(value, expected)
        if not good:
            raise UsageError(f"{path}: field '{where}.{name}' is {_kind(value)}, expected "
                             f"{names[expected]}")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate (a JSON `\\udXXX` escape without its pair) replaced
    by U+FFFD: such text cannot be written as UTF-8 (a summary, JUnit, the job log)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_scrub_surrogates(key): _scrub_surrogates(item) for key, item in value.items()}
    return value


def load_results(path: Path) -> dict[str, Any]:
    """Read and check a results document (with its journal replayed when its run never
    finished); a missing, corrupt or foreign file raises UsageError with one line naming the
    file (and the field at fault)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such results file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the results file: {exc}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: not a results document (the top level is not an object)")
    if document.get("schema") != SCHEMA:
        found = document.get("schema")
        said = (f"is {found}" if isinstance(found, str) else "is missing" if found is None
                else f"is {_kind(found)}")
        raise UsageError(f"{path}: not a hil results document (its field 'schema' {said}, "
                         f"a hil results.json says {SCHEMA})")
    version = document.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        said = ("missing" if version is None else str(version) if isinstance(version, (int, str))
                else _kind(version))
        raise UsageError(f"{path}: field 'version' is {said}, this hil reads {readable}")
    if not isinstance(document.get("run"), dict):
        raise UsageError(f"{path}: field 'run' is missing or not an object")
    scrub = bool(_SURROGATE_ESCAPE.search(text))  # JSON may escape a lone surrogate; UTF-8 cannot hold it
    if document["run"].get("status") == "running":  # its writer never finished: take the journal
        replayed = replay_journal(journal_path(path))
        if replayed is not None and replayed["run"].get("id") == document["run"].get("id"):
            document, scrub = replayed, True
    if scrub:
        document = _scrub_surrogates(document)
    cases = document.get("cases")
    if not isinstance(cases, list):
        raise UsageError(f"{path}: field 'cases' is missing or not a list")
    verdicts = {v.value for v in Verdict}
    _check_types(path, "run", document["run"], RUN_FIELD_TYPES)
    if isinstance(document["run"].get("capacity_lost"), dict):
        _check_types(path, "run.capacity_lost", document["run"]["capacity_lost"], CAPACITY_FIELD_TYPES)
    if not isinstance(document.get("totals", {}), dict):
        raise UsageError(f"{path}: field 'totals' is {_kind(document['totals'])}, expected an object")
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            raise UsageError(f"{path}: field 'cases[{index}]' is not an object")
        for field in ("suite", "precision", "id"):
            if not isinstance(case.get(field), str):
                raise UsageError(f"{path}: field 'cases[{index}].{field}' is missing")
        _check_types(path, f"cases[{index}]", case, CASE_FIELD_TYPES)
        if not isinstance(case.get("verdict"), str) or case.get("verdict") not in verdicts:
            raise UsageError(
                f"{path}: field 'cases[{index}].verdict' is {case.get('verdict')!r}, not a finished verdict"
            )
    return document
