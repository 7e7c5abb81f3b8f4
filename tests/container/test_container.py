"""hil.container and `hil replicate` without an engine: the content-hash tag, the build
context allowlist, the docker run options per board access, environment passed by name
only, and one-line errors for bad input."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil import container
from hil.board.lease import lease_dir
from hil.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


def hil(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A copy of the build context (what .dockerignore lets through, plus noise)."""
    root = tmp_path / "ctx"
    root.mkdir()
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "hil", root / "hil", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "docker", root / "docker")
    (root / "scripts").mkdir()
    for script in ("install-litecore.sh", "build-enn.sh"):
        if (REPO / "scripts" / script).exists():
            shutil.copy(REPO / "scripts" / script, root / "scripts" / script)
    (root / ".venv").mkdir()
    (root / ".venv" / "big.bin").write_bytes(b"x" * 1000)
    (root / "hil-out").mkdir()
    (root / "hil-out" / "results.json").write_text("{}")
    return root


def test_context_is_the_allowlist(context):
    names = [name for name, _ in container._context_entries(container.BuildSpec(context))]
    assert "pyproject.toml" in names and "hil/cli.py" in names and "Dockerfile" in names
    assert not any(n.startswith((".venv", "hil-out", "tests")) for n in names)
    assert not any("__pycache__" in n for n in names)


def test_tag_depends_on_content_target_and_args_not_on_timestamps(context):
    spec = container.BuildSpec(context)
    tag = container.image_tag(spec)
    assert tag.startswith("exynos-hil:host-") and len(tag.split("-")[-1]) == 12
    os.utime(context / "hil" / "cli.py", (1, 1))
    (context / ".venv" / "big.bin").write_bytes(b"changed, but ignored")
    assert container.image_tag(spec) == tag
    assert container.image_tag(container.BuildSpec(context, build_args=(("TORCH_SPEC", "torch"),))) != tag
    assert container.image_tag(container.BuildSpec(context, target="exynos")).startswith("exynos-hil:exynos-")
    (context / "hil" / "cli.py").write_text((context / "hil" / "cli.py").read_text() + "\n# edit\n")
    assert container.image_tag(spec) != tag


def test_ca_certs_and_sdk_tarball_join_the_context_and_the_tag(context, tmp_path):
    cert = tmp_path / "corp.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    sdk = tmp_path / "ai-litecore-ubuntu2204-v1.1.0.tar.gz"
    sdk.write_bytes(b"fake tarball")
    plain = container.BuildSpec(context)
    extra = container.BuildSpec(context, ca_certs=(cert,), litecore_tarball=sdk)
    names = [name for name, _ in container._context_entries(extra)]
    assert "docker/ca-certificates/corp.crt" in names
    assert "docker/litecore/ai-litecore-ubuntu2204-v1.1.0.tar.gz" in names
    assert container.image_tag(extra) != container.image_tag(plain)


def test_secrets_are_not_part_of_the_tag(context, monkeypatch):
    monkeypatch.setenv("K1", "first")
    with_secret = container.BuildSpec(context, target="exynos", secrets=(("litecore_apikey", "K1"),))
    tag = container.image_tag(with_secret)
    monkeypatch.setenv("K1", "second")
    assert container.image_tag(with_secret) == tag
    argv = container.buildkit_argv(with_secret, tag)
    assert "id=litecore_apikey,env=K1" in argv
    assert "first" not in argv and "second" not in argv


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target": "gpu"}, "has no stage 'gpu'"),
        ({"ca_certs": (Path("/nonexistent.crt"),)}, "--ca-cert: not a .crt file"),
        ({"litecore_tarball": Path("/nonexistent.zip")}, "--litecore-sdk: not a .tar.gz file"),
    ],
)
def test_bad_build_spec_is_a_usage_error(context, change, message):
    with pytest.raises(UsageError, match=message):
        container.BuildSpec(context, **change)


def spec(args, **kw) -> container.RunSpec:
    kw.setdefault("user", (1001, 1001))
    kw.setdefault("apparmor", False)
    return container.RunSpec(image="img:1", args=tuple(args), workspace=Path("/ws"), **kw)


def test_host_adb_access_shares_the_host_network_and_its_adb_server(monkeypatch):
    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    argv = container.run_argv(spec(["run", "--board", "R3CX1"]))
    assert argv[:3] == ["docker", "run", "--rm"]
    assert ["--network", "host"] == argv[argv.index("--network"):argv.index("--network") + 2]
    # no server named on the host: the host's own, 5037 (hil is then a client of it)
    assert "ANDROID_ADB_SERVER_PORT=5037" in argv
    assert "ANDROID_ADB_SERVER_PORT" not in argv and "ANDROID_ADB_SERVER_HOST" not in argv
    assert "seccomp=unconfined" not in argv  # real boards: no sandbox options
    assert argv[-4:] == ["img:1", "run", "--board", "R3CX1"]
    assert "-v" in argv and "/ws:/workspace:rw" in argv
    # the host's leases: one owner per board across containers and the host
    assert f"{lease_dir()}:/tmp/exynos-hil-leases:rw" in argv
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", "5038")  # the host names one: by name
    named = container.run_argv(spec(["run", "--board", "R3CX1"]))
    assert "ANDROID_ADB_SERVER_PORT" in named and "ANDROID_ADB_SERVER_PORT=5037" not in named
    assert "5038" not in " ".join(named)
    none = container.run_argv(spec(["run"], access="none"))
    assert not any(a.startswith(("ANDROID_ADB", "/tmp/exynos-hil-leases")) for a in none)


def test_network_access_keeps_the_host_network_out_and_every_container_no_new_privileges(monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", "5038")
    argv = container.run_argv(spec(["run", "--board", "10.0.0.7:5555"], access="network"))
    assert "--network" not in argv and not any("ANDROID_ADB" in a for a in argv)  # its own server
    assert f"{lease_dir()}:/tmp/exynos-hil-leases:rw" in argv  # the host's leases all the same
    for access in container.ACCESS_MODES:
        options = container.run_argv(spec(["run"], access=access))
        assert "no-new-privileges" in options[options.index("--security-opt") + 1:][:1]


def test_usb_access_binds_the_bus_with_a_cgroup_rule_not_device_nodes():
    argv = container.run_argv(spec(["run", "--inventory", "lab.yaml"], access="usb"))
    assert "--device-cgroup-rule" in argv and "c 189:* rmw" in argv
    assert "/dev/bus/usb:/dev/bus/usb:rw" in argv
    assert "HIL_ADB_SERVER=own" in argv  # hil's server in the container owns the USB boards
    assert f"{lease_dir()}:/tmp/exynos-hil-leases:rw" in argv
    assert "--device" not in argv and "--network" not in argv


def test_virtual_boards_get_the_sandbox_options_and_root_gets_sys_admin():
    user = container.run_argv(spec(["run"], access="none"))
    assert "seccomp=unconfined" in user and "--cap-add" not in user
    root = container.run_argv(spec(["run", "--board", "virtual:2"], access="none", user=(0, 0)))
    assert "SYS_ADMIN" in root and "NET_ADMIN" in root  # bwrap's mounts, pid namespace, loopback
    apparmor = container.run_argv(spec(["run"], access="none", apparmor=True))
    assert "apparmor=unconfined" in apparmor


def test_environment_goes_by_name_only(monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "value-that-must-not-print")
    argv = container.run_argv(spec(["run"], env=("MY_TOKEN",)))
    assert "MY_TOKEN" in argv
    assert not any("value-that-must-not-print" in a for a in argv)
    with pytest.raises(UsageError, match="--env: 'A=B' is not a variable name"):
        spec(["run"], env=("A=B",))


@pytest.mark.parametrize(
    ("args", "virtual"),
    [
        (["run"], True), (["run", "--board", "virtual"], True), (["run", "--board=virtual:3"], True),
        (["run", "--board", "R3CX1"], False), (["run", "--inventory", "lab.yaml"], False),
        (["virtual-board", "--port", "0"], True), (["doctor"], True), (["report", "r.json"], False),
        ([], False),
    ],
)
def test_which_commands_start_virtual_boards(args, virtual):
    assert container.uses_virtual_boards(args) is virtual


def test_mount_parsing(tmp_path):
    runner = tmp_path / "runner"
    runner.write_bytes(b"\x7fELF")
    mount = container.Mount.parse(f"{runner}:/opt/runner")
    assert mount.read_only and mount.target == "/opt/runner"
    assert not container.Mount.parse(f"{runner}:/opt/runner:rw").read_only
    for bad in ("nocolon", f"{runner}:relative", f"{runner}:/x:maybe", "/does/not/exist:/x"):
        with pytest.raises(UsageError, match="--mount"):
            container.Mount.parse(bad)


def test_replicate_print_is_one_pasteable_docker_run_line(tmp_path):
    done = hil("replicate", "--print", "--image", "exynos-hil:host-0123456789ab", "--access", "none",
               "--workspace", str(tmp_path), "--", "run", "--suite", "smoke", "--filter", "conv* add")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    argv = shlex.split(lines[0])
    assert argv[:2] == ["docker", "run"]
    assert f"{tmp_path}:/workspace:rw" in argv
    assert argv[-6:] == ["exynos-hil:host-0123456789ab", "run", "--suite", "smoke", "--filter", "conv* add"]


def test_replicate_from_results_replays_the_recorded_command(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"run": {"command": ["hil", "run", "--suite", "smoke", "--shard", "2/3"]}}))
    done = hil("replicate", "--print", "--image", "img:1", "--from", str(results), "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout)[-5:] == ["run", "--suite", "smoke", "--shard", "2/3"]


def test_replicate_without_image_names_this_checkouts_tag(tmp_path):
    done = hil("replicate", "--print", "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    tag = container.image_tag(container.BuildSpec(REPO))
    assert shlex.split(done.stdout)[-2:] == [tag, "run"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--access", "wifi"], "--access: unknown mode 'wifi'"),
        (["--workspace", "/does/not/exist"], "--workspace: not a folder"),
        (["--from", "/does/not/exist.json"], "--from /does/not/exist.json: no run.command"),
        (["--target", "gpu"], "has no stage 'gpu'"),
        (["--build-arg", "NOEQUALS"], "--build-arg: expected KEY=VALUE"),
        (["--mount", "x"], "--mount: expected SRC:/ABS/DST"),
    ],
)
def test_replicate_bad_input_is_one_line_exit_3(args, message):
    done = hil("replicate", "--print", *args)
    assert done.returncode == 3
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_replicate_without_an_engine_is_an_infra_error(tmp_path):
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no.sock")
    done = hil("replicate", "--image", "img:1", "--workspace", str(tmp_path), env=env)
    assert done.returncode == 2
    assert "docker engine not reachable" in done.stderr
    assert "Traceback" not in done.stderr
