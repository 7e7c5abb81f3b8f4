"""Runner candidates: the commits of `--runner-repo` between the runner commits GOOD and BAD
record, each built by `--runner-build CMD` in a worktree of its own.

The build command's contract: CMD is split like a shell line (no shell runs it: wrap it in
`sh -c '...'` for one) and run in a detached worktree of the commit, with HIL_RUNNER_OUT set
to an empty folder; it writes the runner there, as `$HIL_RUNNER_OUT/enn_executor_runner` or
(`scripts/build-enn.sh --out $HIL_RUNNER_OUT` does) `$HIL_RUNNER_OUT/runner/enn_executor_runner`,
a sidecar `.profile.json` beside it if it likes. Exit 0 with the file: built. Exit 125, or any
other failure, or no file: the commit is skipped (as `git bisect run` skips exit 125) and the
answer may become a range. Builds are kept by commit and command under `OUT/builds/runner/`:
a commit is built once, a resumed bisection builds nothing again.

The commits are those of `git rev-list --first-parent GOOD..BAD` (a merge is one candidate).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from hil.bisect.candidates import Candidate
from hil.errors import UsageError

log = logging.getLogger(__name__)

RUNNER_OUT_ENV = "HIL_RUNNER_OUT"
"""The folder a runner build writes the runner to."""
RUNNER_NAME = "enn_executor_runner"
SKIP_EXIT = 125
"""A build command's way to say "this commit cannot be built" (git bisect's)."""
BUILD_TIMEOUT_S = 3600.0
STATUS_FILE = "build.json"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise UsageError(f"--runner-repo {repo}: git {' '.join(args)}: "
                         f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    return done.stdout.strip()


class RunnerBuilds:
    """The commits from GOOD's runner commit to BAD's, and their builds."""

    name = "runner"
    source = "--runner-repo"

    def __init__(self, repo: Path, command: str, good: str | None, bad: str | None,
                 builds: Path, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        if good is None or bad is None:
            which = "GOOD" if good is None else "BAD"
            raise UsageError(f"--runner-repo: {which}.json records no runner commit (a runner built by "
                             "scripts/build-enn.sh records it in its .profile.json)")
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise UsageError(f"--runner-build: cannot split {command!r}: {exc}") from None
        if not self.argv:
            raise UsageError("--runner-build: an empty command")
        self.repo = repo.resolve()
        _git(self.repo, "rev-parse", "--git-dir")
        first = _git(self.repo, "rev-parse", "--verify", f"{good}^{{commit}}")
        last = _git(self.repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
        between = _git(self.repo, "rev-list", "--reverse", "--first-parent", f"{first}..{last}").split()
        if not between or between[-1] != last:
            raise UsageError(f"--runner-repo {repo}: {bad[:12]} does not descend from {good[:12]} "
                             "along first parents")
        subjects = dict(line.split(" ", 1) for line in _git(
            self.repo, "log", "--format=%H %s", "--first-parent", f"{first}^!", f"{first}..{last}"
        ).splitlines() if " " in line)
        self.command_digest = hashlib.sha256(json.dumps(self.argv).encode()).hexdigest()[:12]
        self.builds = builds
        self.timeout_s = timeout_s
        self.candidates = [Candidate("runner", index, sha, sha[:12], None,
                                     {"subject": subjects.get(sha, "")})
                           for index, sha in enumerate([first, *between])]

    def folder(self, candidate: Candidate) -> Path:
        """Where a commit's build is kept (by commit and command)."""
        return self.builds / f"{candidate.key[:16]}-{self.command_digest}"

    def runner(self, candidate: Candidate) -> Path:
        """The built runner of a prepared candidate."""
        status = json.loads((self.folder(candidate) / STATUS_FILE).read_text())
        return Path(status["runner"])

    def prepare(self, candidate: Candidate) -> str | None:
        """Build the commit once (kept); why it could not be built, or None."""
        folder = self.folder(candidate)
        status_path = folder / STATUS_FILE
        if status_path.is_file():
            status = json.loads(status_path.read_text())
            return status.get("skip")
        shutil.rmtree(folder, ignore_errors=True)
        out = folder / "out"
        out.mkdir(parents=True)
        worktree = self.builds / ".worktrees" / candidate.key[:16]
        shutil.rmtree(worktree, ignore_errors=True)
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True, timeout=60)
        _git(self.repo, "worktree", "add", "--detach", "--force", str(worktree), candidate.key)
        try:
            skip = self._build(worktree, out, folder / "build.log")
        finally:
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force", str(worktree)],
                           capture_output=True, timeout=120)
        runner = next((p for p in (out / RUNNER_NAME, out / "runner" / RUNNER_NAME) if p.is_file()), None)
        if skip is None and runner is None:
            skip = f"the build wrote no {RUNNER_NAME} to ${RUNNER_OUT_ENV}"
        status = {"commit": candidate.key, "command": self.argv, "skip": skip,
                  "runner": str(runner) if runner is not None and skip is None else None}
        status_path.write_text(json.dumps(status, indent=1) + "\n")
        log.info("runner %s: %s", candidate.label, f"skipped: {skip}" if skip else f"built: {runner}")
        return skip

    def _build(self, worktree: Path, out: Path, log_path: Path) -> str | None:
        env = dict(os.environ, **{RUNNER_OUT_ENV: str(out)})
        with log_path.open("wb") as output:
            try:
                done = subprocess.run(self.argv, cwd=worktree, env=env, stdout=output,
                                      stderr=subprocess.STDOUT, timeout=self.timeout_s)
            except FileNotFoundError:
                raise UsageError(f"--runner-build: {self.argv[0]}: no such program") from None
            except subprocess.TimeoutExpired:
                return f"the build took longer than {self.timeout_s:g} s (log: {log_path})"
        if done.returncode == SKIP_EXIT:
            return f"the build command exited {SKIP_EXIT}: it cannot be built (log: {log_path})"
        if done.returncode != 0:
            return f"the build failed with exit {done.returncode} (log: {log_path})"
        return None
