"""The content-addressed artifact cache: warm hits, invalidation, corruption, concurrency."""

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.cases import load_suite
from hil.lower.build import build_artifact
from hil.lower.cache import ArtifactCache, cache_key
from hil.lower.pool import lower_cases

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def add_case():
    return next(c for c in load_suite("smoke") if c.id == "add")


def test_key_changes_with_what_changes_the_artifact(add_case):
    key = cache_key(add_case, "xnnpack", "E9955")
    assert key == cache_key(add_case, "xnnpack", "E9955")
    assert key != cache_key(add_case, "portable", "E9955")
    assert key != cache_key(add_case, "xnnpack", "E9965")
    assert key != cache_key(dataclasses.replace(add_case, seed=1), "xnnpack", "E9955")
    other = next(c for c in load_suite("smoke") if c.id == "conv2d_3x3")
    assert cache_key(other, "xnnpack", "E9955") != key


def test_the_smoke_suite_and_its_keys_need_no_torch():
    """A run whose cases are all cached imports no torch: the smoke suite names its modules
    (ModuleRef) and their keys are computed without importing them."""
    probe = ("import sys\n"
             "from hil.cases import load_suite\n"
             "from hil.lower.cache import cache_key\n"
             "from hil.lower.pool import lower_cases\n"
             "keys = {cache_key(c, 'xnnpack', 'E9955') for c in load_suite('smoke')}\n"
             "assert len(keys) == 7, keys\n"
             "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_named_hil_module_is_keyed_by_its_file(tmp_path):
    """Editing the file a ModuleRef names (the smoke suite's modules) changes the keys of the
    cases built from it: the same key computation on a copy of hil whose smoke_modules.py
    has one more line. A reference to another package is keyed by its names (its version
    is in every key)."""
    import hil
    from hil.cases.case import ModuleRef
    from hil.lower.cache import _describe_arg

    probe = ("from hil.cases import load_suite\n"
             "from hil.lower.cache import cache_key\n"
             "tiny = next(c for c in load_suite('smoke') if c.id == 'tiny_cnn')\n"
             "print(cache_key(tiny, 'xnnpack', 'E9955'))\n")

    def key(root: Path) -> str:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=120, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    package = Path(hil.__file__).parent
    for name in ("same", "edited"):
        shutil.copytree(package, tmp_path / name / "hil", ignore=shutil.ignore_patterns("__pycache__"))
    modules = tmp_path / "edited" / "hil" / "cases" / "smoke_modules.py"
    modules.write_text(modules.read_text() + "\n# edited\n")
    assert key(tmp_path / "same") != key(tmp_path / "edited")
    assert key(tmp_path / "same") == key(tmp_path / "same")
    assert _describe_arg(ModuleRef("torch.nn", "Conv2d")) == {"ref": "torch.nn:Conv2d", "source_sha256": None}


def test_warm_rerun_lowers_nothing(add_case, tmp_path):
    cache = ArtifactCache(tmp_path / "cache")
    cold = list(lower_cases([add_case], "xnnpack", "E9955", tmp_path, cache, jobs=1))
    warm = list(lower_cases([add_case], "xnnpack", "E9955", tmp_path, cache, jobs=1))
    assert [r.cached for r in cold] == [False] and [r.cached for r in warm] == [True]
    assert warm[0].artifact.pte.read_bytes() == cold[0].artifact.pte.read_bytes()


def test_corrupted_entry_is_detected_and_rebuilt(add_case, tmp_path):
    cache = ArtifactCache(tmp_path / "cache")
    key = cache_key(add_case, "xnnpack", "E9955")
    artifact = cache.put(key, lambda folder: build_artifact(add_case, "xnnpack", "E9955", folder))
    good = artifact.pte.read_bytes()
    artifact.pte.write_bytes(good[:-7] + b"garbage")
    assert cache.get(key) is None  # detected and removed
    again = list(lower_cases([add_case], "xnnpack", "E9955", tmp_path, cache, jobs=1))
    assert not again[0].cached and again[0].artifact.pte.read_bytes() == good


PUT_SCRIPT = """
import shutil, sys, time
from pathlib import Path
from hil.lower.cache import ArtifactCache
root, key, built, meeting = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
def build(folder):
    for path in built.iterdir():
        shutil.copy2(path, folder / path.name)
    (meeting / sys.argv[5]).touch()  # all three wait inside their build: their renames race
    deadline = time.monotonic() + 120
    while len(list(meeting.iterdir())) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
print(ArtifactCache(root).put(key, build).folder)
"""


def test_concurrent_runs_putting_one_key_leave_one_valid_entry(add_case, tmp_path):
    """Three processes build the same entry at once (each waits inside its build until all
    three are there, then each renames its folder into place): one entry stays, valid, and
    each process gets it. The build copies a lowered artifact: the race is the cache's."""
    key = cache_key(add_case, "xnnpack", "E9955")
    built = tmp_path / "built"
    built.mkdir()
    build_artifact(add_case, "xnnpack", "E9955", built)
    root, meeting = tmp_path / "cache", tmp_path / "meeting"
    meeting.mkdir()
    runs = [
        subprocess.Popen([sys.executable, "-c", PUT_SCRIPT, str(root), key, str(built), str(meeting),
                          str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    outs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], [err[-500:] for _, err in outs]
    assert sorted(p.name for p in meeting.iterdir()) == ["0", "1", "2"]
    assert {out.strip() for out, _ in outs} == {str(root / key[:2] / key)}
    entry = ArtifactCache(root).get(key)
    assert entry is not None and entry.pte.read_bytes() == (built / entry.pte.name).read_bytes()
    assert [p.name for p in (root / key[:2]).iterdir()] == [key]  # no half-built leftovers
