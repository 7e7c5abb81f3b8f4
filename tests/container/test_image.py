"""The image for real, on a docker engine started by this session (tests/container/
conftest.py): the `host` target built offline (debootstrap base image, the host's extra
CA certificates, the wheelhouse served on 127.0.0.1), `hil run --board virtual --suite
smoke` inside it (run by action.yml through `hil replicate`, the JUnit checked in the
mounted workspace), the same run reproduced by pasting `hil replicate --print` into a shell,
`hil doctor` in it as a non-root user, and a BuildKit build with a dummy LITECORE key that
leaves no trace in the image or its history.

Slow: the first image build takes minutes (the Python stack is ~1.5 GB unpacked)."""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from hil import container
from hil.errors import InfraError
from tests.container import fake_litecore
from tests.container.conftest import (
    BUILDKIT_CLI,
    REPO,
    extra_ca_certs,
    served_with_key,
    timed,
)

pytestmark = pytest.mark.slow


def outcomes(junit: Path) -> dict[str, str]:
    """classname.name -> pass | failure | error | skipped."""
    found = {}
    for suite in JUnitXml.fromfile(str(junit)):
        for case in suite:
            kind = type(case.result[0]).__name__.lower() if case.result else "pass"
            found[f"{case.classname}.{case.name}"] = kind
    return found


def smoke_case_ids() -> set[str]:
    from hil.cases import expand_precisions, load_suite

    return {f"{c.classname}.{c.id}" for c in expand_precisions(load_suite("smoke"), "fp32")}


def test_smoke_suite_runs_in_the_container_and_writes_junit_to_the_workspace(action_smoke_run):
    run = action_smoke_run
    assert run.result.exit_code == 0, run.result.stdout[-3000:] + run.result.stderr[-3000:]
    found = outcomes(run.workspace / "hil-out" / "junit.xml")
    assert set(found) == smoke_case_ids()
    assert set(found.values()) == {"pass"}
    results = json.loads((run.workspace / "hil-out" / "results.json").read_text())
    assert results["run"]["virtual"] is True
    assert results["run"]["status"] == "complete"
    assert results["run"]["command"][:2] == ["hil", "run"]
    assert "passed" in run.result.stdout  # hil's output was streamed from the container


def test_replicate_print_pasted_into_a_shell_reproduces_the_run(engine, host_image, action_smoke_run,
                                                               tmp_path):
    first = action_smoke_run.workspace / "hil-out"
    printed = subprocess.run(
        [sys.executable, "-m", "hil", "replicate", "--print", "--image", host_image.tag,
         "--access", "none", "--workspace", str(tmp_path), "--from", str(first / "results.json")],
        capture_output=True, text=True, cwd=REPO, env=engine.env, timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    line = printed.stdout.strip()
    assert "\n" not in line and line.startswith("docker run ")
    pasted = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path,
                            env=engine.env, timeout=1200)
    assert pasted.returncode == 0, pasted.stdout[-3000:] + pasted.stderr[-3000:]
    assert outcomes(tmp_path / "hil-out" / "junit.xml") == outcomes(first / "junit.xml")
    replayed = json.loads((tmp_path / "hil-out" / "results.json").read_text())["run"]["command"]
    assert replayed == json.loads((first / "results.json").read_text())["run"]["command"]


def test_doctor_in_the_container_as_a_non_root_user(engine, host_image, tmp_path):
    """Also the SDK path of hil.container.run_container, with its streamed output."""
    spec = container.RunSpec(image=host_image.tag, workspace=tmp_path, access="none",
                             args=("doctor", "--require", "executorch,adb,bwrap"), user=(1000, 1000))
    lines: list[str] = []
    assert container.run_container(spec, on_output=lines.append, client=engine.client()) == 0, lines
    bwrap = [line for line in lines if line.split()[:2] == ["ok", "bwrap"]]
    assert bwrap, lines
    # docker's masked /proc: no fresh /proc for a new pid namespace without root (PidNamespace)
    assert "no pid namespace of the board's own" in bwrap[0], bwrap
    # Control: the same probe without the sandbox options cannot make a namespace.
    bare = engine.cli("run", "--rm", "--user", "1000:1000", host_image.tag, "doctor",
                      "--require", "bwrap", check=False, text=True)
    assert bare.returncode == 3
    assert "MISSING  bwrap" in bare.stdout


def test_virtual_boards_run_in_the_container_as_a_non_root_user(engine, host_image, tmp_path):
    """As a GitHub runner's uid runs the action's container: no pid namespace of the board's
    own there (test_doctor_in_the_container_as_a_non_root_user), the board says so once in its
    log and its shells share the container's; the smoke suite passes all the same."""
    tmp_path.chmod(0o777)
    spec = container.RunSpec(image=host_image.tag, workspace=tmp_path, access="none", user=(1000, 1000),
                             args=("run", "--board", "virtual", "--suite", "smoke", "--out", "hil-out"))
    lines: list[str] = []
    with timed("smoke run in the container as uid 1000"):
        code = container.run_container(spec, on_output=lines.append, client=engine.client())
    assert code == 0, lines[-40:]
    found = outcomes(tmp_path / "hil-out" / "junit.xml")
    assert set(found) == smoke_case_ids()
    assert set(found.values()) == {"pass"}  # not every shell failing on its --pidns
    # What the board's log says there, and its shells' PIDs: the container's, not 1, 2, 3...
    shown = engine.cli("run", "--rm", "--user", "1000:1000",
                       *[f"--security-opt={option}" for option in spec.security_opt],
                       "--entrypoint", "python3", host_image.tag, "-c", SHELLS_AND_LOG, text=True).stdout
    pids = [int(line.split()[1]) for line in shown.splitlines() if line.startswith("shell ")]
    assert len(pids) == 2 and min(pids) > 3, shown
    assert shown.count("share the pid namespace they start in") == 1, shown
    assert "Can't mount proc" in shown, shown


SHELLS_AND_LOG = """
import asyncio
from pathlib import Path
from hil.virtual.device import Device
device = Device(Path("/tmp/board"), "E9955", "v1")
device.prepare()
async def shells():
    for _ in range(2):
        shell = await device.spawn("echo $$", {}, True)
        print("shell", (await shell.communicate())[0].decode().strip())
asyncio.run(shells())
device.close()
print(device.logcat_path.read_text())
"""


def test_buildkit_secret_leaves_no_trace(engine, base_image, tmp_path, monkeypatch, portal_ca):
    key = f"hil-dummy-litecore-key-{secrets.token_hex(8)}"
    tarball = fake_litecore.make_tarball(tmp_path / "portal")
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    monkeypatch.setenv("HIL_TEST_LITECORE_KEY", key)
    with served_with_key(tmp_path / "portal", key, portal_ca) as (url, seen):  # https, as the portal
        spec = container.BuildSpec(
            context=REPO, target="litecore", ca_certs=(*extra_ca_certs(), portal_ca.cert), network_host=True,
            build_args=(("BASE_IMAGE", base_image), ("LITECORE_URL", url),
                        ("LITECORE_SHA256", hashlib.sha256(tarball.read_bytes()).hexdigest())),
            secrets=(("litecore_apikey", "HIL_TEST_LITECORE_KEY"),),
        )
        log: list[str] = []
        with timed("BuildKit litecore builds (wrong key, dummy key)"):
            monkeypatch.setenv("HIL_TEST_LITECORE_KEY", "a-wrong-key")
            with pytest.raises(InfraError, match="download of ai-litecore-ubuntu2204-v1.1.0.tar.gz failed"):
                container.build_image(spec, on_log=lambda line: None, client=engine.client(),
                                      docker_cli=BUILDKIT_CLI)
            monkeypatch.setenv("HIL_TEST_LITECORE_KEY", key)
            tag = container.build_image(spec, on_log=log.append, client=engine.client(),
                                        docker_cli=BUILDKIT_CLI)
    assert seen == ["a-wrong-key", key]  # the secret reached the download, as a header
    assert not any(key in line for line in log)
    history = engine.cli("history", "--no-trunc", tag, text=True).stdout
    assert "LITECORE_URL" in history or "install-litecore.sh" in history
    assert key not in history
    inspect = engine.cli("image", "inspect", tag, text=True).stdout
    assert key not in inspect
    saved = engine.cli("save", tag).stdout  # every layer and the config, uncompressed
    assert fake_litecore.MARKER in saved  # control: the scan sees the files of the layers
    assert key.encode() not in saved
    version = engine.cli("run", "--rm", "--entrypoint", "cat", tag, "/opt/litecore/.litecore-version", text=True)
    assert version.stdout.strip() == "1.1.0"


@pytest.mark.full
def test_the_image_builds_from_scratch(host_image):
    """--full (the nightly job): an empty data root, so every step of the `host` target ran;
    CI reuses a kept root's layers while their inputs are unchanged (test_docker_cache.py)."""
    assert host_image.cache == "fresh"
    assert any(line.startswith("Step ") for line in host_image.log), host_image.log[-5:]
    assert not any("Using cache" in line or "present: not rebuilt" in line for line in host_image.log)
