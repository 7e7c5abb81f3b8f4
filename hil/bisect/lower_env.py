"""Lower cases in the environment this Python runs in: what `hil bisect` runs in a Python-side
candidate's environment (`python -m hil.bisect.lower_env`, hil/bisect/python_env.py).

Reads one JSON request on stdin: `suites` (names or manifest files), `pretrained`, `keys`
(case keys, `suite.precision.id`), `flow`, `chipset`, `cache` (the artifact cache folder) and
`scratch`; lowers the cases (each once: hil's content-addressed cache) and prints one JSON line:
`{"artifacts": {KEY: FOLDER}, "failed": {KEY: {"verdict", "message"}}, "packages": {...},
"executorch_git": ...}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def lower_request(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request (module docstring)."""
    from hil.cases import expand_precisions, load_suite
    from hil.lower.cache import ArtifactCache
    from hil.lower.pool import lower_cases
    from hil.run.records import versions

    wanted = list(request["keys"])
    cases = []
    for suite in request["suites"]:
        cases += expand_precisions(load_suite(suite, pretrained=bool(request.get("pretrained"))), "all")
    chosen = [next(case for case in cases if case.key == key) for key in wanted]
    answer: dict[str, Any] = {"artifacts": {}, "failed": {}}
    for lowering in lower_cases(chosen, request["flow"], request["chipset"], Path(request["scratch"]),
                                ArtifactCache(Path(request["cache"])), 1):
        key = chosen[lowering.index].key
        if lowering.artifact is not None:
            answer["artifacts"][key] = str(lowering.artifact.folder)
        else:
            assert lowering.verdict is not None
            answer["failed"][key] = {"verdict": lowering.verdict.value, "message": lowering.message}
    found = versions()
    answer.update(packages=found["packages"], executorch_git=found["executorch_git"])
    return answer


def main() -> int:
    answer = lower_request(json.loads(sys.stdin.read()))
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
