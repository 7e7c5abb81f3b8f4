"""examples/workflows/bisect.yml's `run:` steps as written, with the stub launcher (stubs.py):
what `hil bisect` is given, the summary appended, and which exit codes fail the job."""

from __future__ import annotations

import pytest
import yaml

from .stubs import calls, make_stubs
from .test_example_workflows import EXAMPLES, VALUES, run_job


@pytest.mark.parametrize(("code", "job_fails"), [(0, False), (4, False), (5, False), (6, False), (2, True), (3, True)])
def test_the_bisect_step_passes_the_candidates_and_fails_only_on_2_and_3(
        tmp_path, monkeypatch, code: int, job_fails: bool) -> None:
    job = yaml.safe_load((EXAMPLES / "bisect.yml").read_text())["jobs"]["bisect"]
    workspace = tmp_path / "ws"
    (tmp_path / "temp").mkdir()
    workspace.mkdir()
    monkeypatch.setitem(VALUES, "inputs.firmware-builds", "/srv/firmware")
    monkeypatch.setitem(VALUES, "inputs.filter", "ops.fp32.*")
    env = {**make_stubs(tmp_path / "stubs"), "STUB_RC": str(code)}
    ran = dict(run_job(job, workspace, env))
    assert ran["Bisect"] == (code if job_fails else 0)
    (bisect,) = [argv for argv in calls(env, "hil") if "bisect" in argv]
    inner = bisect[bisect.index("--") + 1:]
    assert inner[:5] == ["bisect", "--good", "nights/good/results.json", "--bad", "nights/bad/results.json"]
    assert inner[inner.index("--firmware-builds") + 1] == "/srv/firmware"
    assert inner[inner.index("--filter") + 1] == "ops.fp32.*" and "--runner-repo" not in inner
    assert bisect[bisect.index("--mount") + 1] == "/srv/firmware:/srv/firmware:ro"
    assert "## hil bisect: stub" in (tmp_path / "summary.md").read_text()
