"""Hostile input never runs anything, on the host or on the board, and never leaves the run's
device folder; secrets stay out of every output; the virtual board is reachable from loopback
only. Real processes throughout: `hil run`, the adb server, a virtual board."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import adbutils
import pytest
import yaml

from hil.board.commands import device_command
from hil.virtual.launcher import VirtualBoardProcess

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.mark.slow  # lowers five small cases (fewer than the lowering pool's threshold)
def test_hostile_ids_paths_and_names_execute_nothing_and_stay_in_the_workdir(
    virtual_board: VirtualBoardProcess, tmp_path: Path
) -> None:
    marker = f"hil-pwned-{uuid.uuid4().hex[:8]}"
    ids = [
        "x$(touch /tmp/pwned)",
        f"d$(touch /data/local/tmp/{marker})",
        f"semi;touch /tmp/{marker};'\"`id`",
        "../../../../escape",
        "spa ce & ü 模型",
    ]
    folder = tmp_path / f"we$(touch {marker}) 'ird\" ü;"
    folder.mkdir()
    shutil.copy(FIXTURES / "user_models.py", folder / "user_models.py")
    manifest = folder / "hostile $(id).yaml"
    manifest.write_text(yaml.safe_dump({"suite": "hostile;$(id)", "cases": [
        {"id": case_id, "module": "user_models:make_mlp", "kwargs": {"hidden": 4},
         "inputs": [{"shape": [1, 8]}]} for case_id in ids
    ]}, allow_unicode=True))
    out = tmp_path / f"out $(touch {marker})"
    secret = f"litecore-{uuid.uuid4().hex}"
    pwned_before = os.path.exists("/tmp/pwned") and os.stat("/tmp/pwned").st_mtime_ns
    device_data = virtual_board.root / "fs" / "data"
    before = _tree(device_data)

    done = subprocess.run(
        [sys.executable, "-m", "hil", "-vv", "run", "--board", virtual_board.address,
         "--suite", str(manifest), "--flow", "portable", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, HIL_LITECORE_API_KEY=secret),
    )

    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "results.json").read_text())
    assert sorted(c["id"] for c in results["cases"]) == sorted(ids)  # lowered in parallel
    assert {c["verdict"] for c in results["cases"]} == {"PASS"}
    junit_names = [tc.get("name") for tc in ET.parse(out / "junit.xml").getroot().iter("testcase")]
    assert sorted(junit_names) == sorted(ids)
    # nothing ran on the host ...
    assert (os.path.exists("/tmp/pwned") and os.stat("/tmp/pwned").st_mtime_ns) == pwned_before
    assert not list(Path("/tmp").glob(f"{marker}*"))
    assert not list(tmp_path.rglob(marker))
    # ... nor on the board, and nothing stayed outside hil's folder there
    new = _tree(device_data) - before
    assert all(path.startswith("local/tmp/hil") for path in new), sorted(new)
    assert not any(marker in path for path in _tree(virtual_board.root / "fs"))
    # the secret in the environment is in no output
    outputs = [done.stdout, done.stderr] + [p.read_text(errors="replace")
                                            for p in out.rglob("*") if p.suffix in (".json", ".xml", ".log")]
    assert not any(secret in text for text in outputs)


def test_device_commands_are_quoted_argument_lists(board_device: adbutils.AdbDevice) -> None:
    marker = f"/data/local/tmp/hil-quoted-{uuid.uuid4().hex[:8]}"
    words = [f"$(touch {marker})", f"; touch {marker}", "`id`", "'\"", "a b", "ü", "*", "&&"]
    result = board_device.shell2(device_command(["printf", "%s\\n", *words]), v2=True)
    assert result.returncode == 0
    assert result.stdout.splitlines() == words
    assert board_device.shell2(device_command(["ls", marker]), v2=True).returncode != 0


@pytest.mark.parametrize("args", [
    ["--board", "127.0.0.1:1;touch /tmp/pwned"],
    ["--board", "$(touch /tmp/pwned)"],
    ["--suite", "/nonexistent/$(touch /tmp/pwned).yaml"],
])
def test_hostile_flags_are_usage_errors(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hil", "run", *args, "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert done.stderr.startswith("hil: error: ") and done.stderr.count("\n") == 1


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_virtual_board_is_not_reachable_from_outside_loopback(
    virtual_board: VirtualBoardProcess,
) -> None:
    port = int(virtual_board.address.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    address = _outward_address()
    if address is None:
        pytest.skip("the host has no non-loopback address to try from")
    with pytest.raises(OSError):
        socket.create_connection((address, port), timeout=5).close()
