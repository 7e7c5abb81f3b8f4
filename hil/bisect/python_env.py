"""Python-side candidates: `--wheels DIR`, each candidate lowering in its own environment.

```
DIR/                                    either wheels of one distribution, each a candidate,
  executorch-1.6.0.dev20261101-...whl   ordered by version (PEP 440);
  executorch-1.6.0.dev20261102-...whl
  ...
DIR/                                    or one folder per candidate (ordered by name), its
  2026-11-01/executorch-...whl          wheels installed together (an ExecuTorch nightly and
  2026-11-01/torch-...whl               the torch it needs)
```

Each candidate gets a virtual environment made by uv, kept by the digest of its wheels in the
artifact cache's folder (`CACHE/bisect/python/DIGEST/venv`): the wheels installed in it without their
dependencies, layered on the environment hil runs in (a `.pth` adds its site-packages after
the candidate's own, so torch and hil itself come from there, not copied). The candidate's
cases are lowered in it (`python -m hil.bisect.lower_env`), into an artifact cache of its own
beside it (hil's content-addressed cache: lowered once per candidate, kept).

The ends are the candidates whose versions GOOD and BAD record (`run.packages`), else the
first and the last.

`--index-url URL --package NAME` (default executorch) instead: the versions of NAME the index
lists from GOOD's recorded version to BAD's (`pip index versions --pre`), each candidate
installed from the index by uv (`NAME==VERSION`, without dependencies).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename

from hil.bisect.candidates import Candidate, ends, natural_key
from hil.errors import UsageError

log = logging.getLogger(__name__)

READY_FILE = ".hil-ready"
LAYER_FILE = "_hil_base.pth"
"""The .pth that layers a candidate's environment on hil's own."""
LOWER_TIMEOUT_S = 3600.0


def _wheels(folder: Path) -> list[tuple[str, str, Path]]:
    """(distribution, version, file) of the wheels in `folder`."""
    found = []
    for path in sorted(folder.glob("*.whl")):
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
        except ValueError as exc:
            raise UsageError(f"--wheels: {path}: not a wheel file name ({exc})") from None
        found.append((str(name), str(version), path))
    return found


def _digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise UsageError("--wheels/--index-url: uv is needed to make the candidates' environments "
                         "(pip install uv)")
    return found


class PythonSide:
    """Python-side candidates and their environments (a subclass says where they come from:
    `candidates` and `_install`)."""

    name = "python"
    source = ""
    candidates: list[Candidate]

    def __init__(self, store: Path, request: dict[str, Any]) -> None:
        """`request`: what each candidate lowers (`lower_env.py`'s request: suites, keys, flow,
        chipset, pretrained)."""
        self.store = store
        self.request = request
        self.lowered: dict[str, dict[str, Any]] = {}
        """Per prepared candidate (key), its cases by key: an Artifact, or its lowering's
        failure ({verdict, message}): what its board runs run."""
        self.environments: dict[str, dict[str, Any]] = {}
        """Per prepared candidate, what its environment reports (`packages`, `executorch_git`)."""
        self.uv = _uv()

    def _install(self, candidate: Candidate) -> list[str]:
        """What `uv pip install --python VENV --no-deps` is given for `candidate`."""
        raise NotImplementedError

    def folder(self, candidate: Candidate) -> Path:
        return self.store / candidate.key

    def python(self, candidate: Candidate) -> Path:
        return self.folder(candidate) / "venv" / "bin" / "python"

    def prepare(self, candidate: Candidate) -> str | None:
        """The candidate's environment (made once, kept by its digest) and its cases lowered
        there; why it could not be installed or could not lower at all, or None. A case whose
        lowering fails there is that candidate's failure (FAIL_LOWER...), not a skip."""
        if candidate.key in self.lowered:
            return None
        reason = self._environment(candidate)
        if reason is not None:
            return reason
        from hil.lower.cache import load_artifact

        answer = self.lower(candidate, self.request)
        if "error" in answer:
            return answer["error"]
        self.environments[candidate.key] = {"packages": answer.get("packages"),
                                            "executorch_git": answer.get("executorch_git")}
        self.lowered[candidate.key] = {**{key: load_artifact(Path(folder))
                                          for key, folder in answer["artifacts"].items()},
                                       **answer["failed"]}
        return None

    def _environment(self, candidate: Candidate) -> str | None:
        venv = self.folder(candidate) / "venv"
        if (venv / READY_FILE).is_file():
            return None
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        log_path = self.folder(candidate) / "install.log"
        with log_path.open("wb") as output:
            steps = [[self.uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                     [self.uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                      "--no-deps", *self._install(candidate)]]
            for step in steps:
                done = subprocess.run(step, stdout=output, stderr=subprocess.STDOUT, timeout=600)
                if done.returncode != 0:
                    return f"{' '.join(step[:3])} failed with exit {done.returncode} (log: {log_path})"
                if step is steps[0]:
                    self._layer(venv)
        (venv / READY_FILE).write_text("")
        return None

    @staticmethod
    def _layer(venv: Path) -> None:
        """hil's environment under the candidate's: its site-packages after the candidate's own."""
        python = venv / "bin" / "python"
        code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                              timeout=60).stdout.strip()
        base = sysconfig.get_paths()["purelib"]
        (Path(site) / LAYER_FILE).write_text(f"import site; site.addsitedir({base!r})\n")

    def lower(self, candidate: Candidate, request: dict[str, Any]) -> dict[str, Any]:
        """Lower the request's cases in the candidate's environment (`lower_env.py`); its
        answer: per case key its artifact folder or its failure, and the environment's
        packages."""
        request = {**request, "cache": str(self.folder(candidate) / "artifacts"),
                   "scratch": str(self.folder(candidate) / "scratch")}
        done = subprocess.run([str(self.python(candidate)), "-m", "hil.bisect.lower_env"],
                              input=json.dumps(request), capture_output=True, text=True,
                              timeout=LOWER_TIMEOUT_S)
        (self.folder(candidate) / "lower.log").write_text(done.stderr)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"lowering in {candidate.label}'s environment failed (exit "
                             f"{done.returncode}): {last}"}
        return json.loads(done.stdout.strip().splitlines()[-1])



class Wheels(PythonSide):
    """The wheel sets of a folder between GOOD's Python side and BAD's, in order."""

    source = "--wheels"

    def __init__(self, root: Path, good: dict[str, str], bad: dict[str, str], store: Path,
                 request: dict[str, Any]) -> None:
        if not root.is_dir():
            raise UsageError(f"--wheels {root}: not a folder")
        sets = self._sets(root)
        if len(sets) < 2:
            raise UsageError(f"--wheels {root}: fewer than two candidates")

        def matches(packages: dict[str, str], wheels: list[tuple[str, str, Path]]) -> bool:
            recorded = {canonicalize_name(k): v for k, v in packages.items()}
            return all(recorded.get(canonicalize_name(name)) == version for name, version, _ in wheels)

        found = [next((i for i, (_, wheels) in enumerate(sets) if matches(packages, wheels)), None)
                 for packages in (good, bad)]
        try:
            first, last = ends(len(sets), *found, "--wheels")
        except ValueError as exc:
            raise UsageError(f"--wheels {root}: {exc}") from None
        super().__init__(store, request)
        self.candidates = []
        for index in range(first, last + 1):
            label, wheels = sets[index]
            files = [path for _, _, path in wheels]
            self.candidates.append(Candidate(
                "python", index - first, _digest(files), label, files[0].parent,
                {"wheels": [path.name for path in files]}))
        self._files = {c.key: [path for _, _, path in sets[first + c.index][1]] for c in self.candidates}

    def _install(self, candidate: Candidate) -> list[str]:
        return ["--no-index", *map(str, self._files[candidate.key])]

    @staticmethod
    def _sets(root: Path) -> list[tuple[str, list[tuple[str, str, Path]]]]:
        """(label, wheels) per candidate, ordered (module docstring)."""
        from packaging.version import Version

        folders = sorted((p for p in root.iterdir() if p.is_dir() and any(p.glob("*.whl"))),
                         key=lambda p: natural_key(p.name))
        if folders:
            return [(folder.name, _wheels(folder)) for folder in folders]
        wheels = _wheels(root)
        names = {name for name, _, _ in wheels}
        if len(names) != 1:
            raise UsageError(f"--wheels {root}: wheels of {len(names)} distributions "
                             f"({', '.join(sorted(names)) or 'none'}): put each candidate's in a folder")
        ordered = sorted(wheels, key=lambda w: Version(w[1]))
        return [(f"{name} {version}", [(name, version, path)]) for name, version, path in ordered]


class IndexVersions(PythonSide):
    """The versions of one distribution a package index has, from GOOD's to BAD's (as
    `pip index versions` lists them, pre-releases included: ExecuTorch's nightlies are
    `X.Y.Z.devYYYYMMDD`), each installed from the index into its environment."""

    source = "--index-url"

    def __init__(self, url: str, package: str, good: dict[str, str], bad: dict[str, str], store: Path,
                 request: dict[str, Any]) -> None:
        from packaging.version import Version

        recorded = [{canonicalize_name(k): v for k, v in packages.items()}.get(canonicalize_name(package))
                    for packages in (good, bad)]
        if None in recorded:
            which = "GOOD" if recorded[0] is None else "BAD"
            raise UsageError(f"--package {package}: {which}.json records no version of it (run.packages)")
        listed = sorted(self._versions(url, package), key=Version)
        missing = [v for v in recorded if v not in listed]
        if missing:
            shown = ", ".join(listed[-5:]) or "nothing"
            raise UsageError(f"--index-url {url}: {package} {missing[0]} is not there (it lists "
                             f"{'... ' if len(listed) > 5 else ''}{shown})")
        first, last = listed.index(recorded[0]), listed.index(recorded[1])
        if first >= last:
            raise UsageError(f"--index-url: {package} {recorded[0]} (GOOD) is not older than "
                             f"{recorded[1]} (BAD)")
        super().__init__(store, request)
        self.url, self.package = url, package
        self.candidates = [
            Candidate("python", index - first,
                      hashlib.sha256(f"{url} {package}=={version}".encode()).hexdigest()[:16],
                      f"{package} {version}", None, {"index": url, "version": version})
            for index, version in enumerate(listed) if first <= index <= last]

    @staticmethod
    def _versions(url: str, package: str) -> list[str]:
        """`pip index versions PACKAGE --pre --index-url URL` (pip, the ordinary client)."""
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--pre",
                               "--index-url", url, "--disable-pip-version-check"],
                              capture_output=True, text=True, timeout=300)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("Available versions:")), None)
        if done.returncode != 0 or line is None:
            why = (done.stderr.strip().splitlines() or ["no versions listed"])[-1]
            raise UsageError(f"--index-url {url}: {package}: {why}")
        return [version.strip() for version in line.split(":", 1)[1].split(",") if version.strip()]

    def _install(self, candidate: Candidate) -> list[str]:
        return ["--index-url", self.url, f"{self.package}=={candidate.detail['version']}"]
