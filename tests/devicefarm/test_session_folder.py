"""devicefarm sessions on a host other users share: they live in a folder private to the user
(XDG_RUNTIME_DIR, else `<temp>/hil-devicefarm-<uid>` made 0700), and a folder another user
made first under that name is refused, not used. Acted out as uid 4321."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hil.devicefarm.session import Session, private_folder, sessions_root
from hil.errors import UsageError
from tests.second_user import SECOND_UID, as_second_user, needs_root, shared_tmp

__all__ = ["shared_tmp"]  # the fixture
REPO = Path(__file__).resolve().parents[2]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HIL_DEVICEFARM_DIR", "XDG_RUNTIME_DIR")}
    return {**env, "TMPDIR": str(tmp), "HIL_LEASE_DIR": str(tmp / "leases"),
            "HIL_DEVICEFARM_SESSION": "ci-job", **extra}


def test_sessions_live_in_the_runtime_folder_or_a_private_one(tmp_path: Path) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    assert sessions_root({"XDG_RUNTIME_DIR": str(runtime)}) == runtime / "hil-devicefarm"
    runtime.chmod(0o777)  # not private: not used
    fallback = sessions_root({"XDG_RUNTIME_DIR": str(runtime)})
    assert fallback.name == f"hil-devicefarm-{os.geteuid()}" and fallback.parent != runtime
    made = private_folder(tmp_path / "sessions")
    assert (made.stat().st_mode & 0o777) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o775)
    with pytest.raises(UsageError, match=f"sessions folder {loose} has mode 0775: refused"):
        private_folder(loose)


def test_session_files_are_private_and_never_written_through_a_link(tmp_path: Path) -> None:
    session = Session("job", private_folder(tmp_path / "sessions") / "job")
    session.create()
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    (session.folder / "holder.json").symlink_to(victim)
    session.write("holder.json", {"pid": 1})
    assert victim.read_text() == "untouched\n"
    assert session.holder() == {"pid": 1}
    assert (session.folder / "holder.json").stat().st_mode & 0o777 == 0o600


@needs_root
def test_a_sessions_folder_another_user_made_first_is_refused(shared_tmp: Path) -> None:
    squatted = [shared_tmp / f"hil-devicefarm-{os.geteuid()}", shared_tmp / "leases" / f"devicefarm-{os.geteuid()}"]

    def squat() -> None:
        (shared_tmp / "leases").mkdir(mode=0o777)
        for folder in squatted:
            folder.mkdir(mode=0o777)
            os.chmod(folder, 0o777)

    shared_tmp.chmod(0o777)
    as_second_user(squat)
    result = subprocess.run([sys.executable, "-m", "hil.devicefarm", "-C"], cwd=REPO, env=_env(shared_tmp),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert f"sessions folder {squatted[0]} belongs to uid {SECOND_UID}: refused" in line
    assert all(not any(folder.iterdir()) for folder in squatted)  # nothing of root's in theirs
