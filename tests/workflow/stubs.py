"""Stub executables for running action.yml's and the example workflows' shell steps without
docker, pip or a network: a PATH folder whose `python3`, `docker` and launcher `hil` record
their argv (JSON lines in $STUB_LOG) and act just enough. The fake `hil replicate -- ...`
runs the REAL hil for report/merge/compare (no container), and for `run` copies the canned
results document $STUB_RESULTS to --results and exits $STUB_RC, for `bisect` writes a canned
bisect.md into --out and exits $STUB_RC."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FAKE_HIL = r'''#!PYTHON
import json, os, shutil, subprocess, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({"tool": "hil", "argv": sys.argv[1:]}) + "\n")
argv = sys.argv[1:]
if argv[:1] != ["replicate"]:
    sys.exit(f"stub hil: only replicate, not {argv}")
if "--build-only" in argv:
    print("exynos-hil:stub"); sys.exit(0)
inner = argv[argv.index("--") + 1:] if "--" in argv else []
if "--print" in argv:
    print("docker run stub " + " ".join(inner)); sys.exit(0)
if inner[:1] == ["run"]:
    results = inner[inner.index("--results") + 1]
    target = os.path.join(os.environ.get("GITHUB_WORKSPACE", "."), results)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.environ.get("STUB_RESULTS"):
        shutil.copy(os.environ["STUB_RESULTS"], target)
    sys.exit(int(os.environ.get("STUB_RC", "0")))
if inner[:1] == ["doctor"]:
    sys.exit(1)
if inner[:1] == ["bisect"]:  # no board here: a canned summary, the exit code $STUB_RC
    out = os.path.join(os.environ.get("GITHUB_WORKSPACE", "."), inner[inner.index("--out") + 1])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bisect.md"), "w") as summary:
        summary.write("## hil bisect: stub\n")
    sys.exit(int(os.environ.get("STUB_RC", "0")))
env = dict(os.environ, PYTHONPATH=os.environ["STUB_REPO"])
sys.exit(subprocess.run([sys.executable, "-m", "hil", *inner], env=env).returncode)
'''

PYTHON3 = r'''#!/usr/bin/env bash
# python3 -m venv DIR makes a venv of stubs; anything else is the real Python.
echo "{\"tool\": \"python3\", \"argv\": $(REAL="$STUB_PYTHON" "$STUB_PYTHON" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@")}" >> "$STUB_LOG"
if [ "$1" = -m ] && [ "$2" = venv ]; then
  venv="${@: -1}"
  mkdir -p "$venv/bin"
  ln -sf "$STUB_DIR/hil" "$venv/bin/hil"
  ln -sf "$STUB_PYTHON" "$venv/bin/python"
  printf '#!/usr/bin/env bash\necho "{\\"tool\\": \\"pip\\", \\"argv\\": \\"$*\\"}" >> "$STUB_LOG"\n' > "$venv/bin/pip"
  chmod +x "$venv/bin/pip"
  exit 0
fi
exec "$STUB_PYTHON" "$@"
'''

DOCKER = r'''#!/usr/bin/env bash
# docker run ... IMAGE ARGS: the image launcher's container: run the stub hil with ARGS.
"$STUB_PYTHON" -c 'import json,os,sys; open(os.environ["STUB_LOG"],"a").write(json.dumps({"tool":"docker","argv":sys.argv[1:]})+"\n")' "$@"
args=("$@")
for i in "${!args[@]}"; do
  if [ "${args[$i]}" = "$STUB_IMAGE" ]; then exec "$STUB_DIR/hil" "${args[@]:$((i + 1))}"; fi
done
exit 0
'''


def make_stubs(folder: Path) -> dict[str, str]:
    """The stubs in `folder`; the environment (PATH first) a step runs them with."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("hil", FAKE_HIL.replace("PYTHON", sys.executable, 1)),
                       ("python3", PYTHON3), ("docker", DOCKER)):
        path = folder / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log = folder / "log.jsonl"
    log.write_text("")
    return {
        **os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "STUB_DIR": str(folder),
        "STUB_LOG": str(log), "STUB_PYTHON": sys.executable, "STUB_REPO": str(REPO),
        "STUB_IMAGE": "exynos-hil:prebuilt",
    }


def calls(env: dict[str, str], tool: str) -> list:
    """The argv of every call of `tool`, in order."""
    lines = Path(env["STUB_LOG"]).read_text().splitlines()
    return [entry["argv"] for entry in map(json.loads, lines) if entry["tool"] == tool]
