"""`hil bisect`: which build broke it. One more front over the board pool, beside run and
localize (the pool brings boards up, leases, recovers them; provisioning flashes; the artifact
cache lowers once; `hil compare` says what regressed; the journal resumes after kill -9).

```
GOOD.json, BAD.json ─► selection.py (what regressed) ─► tuple.py (what changed)
   ─► candidates per factor: firmware.py (build folders), runner_builds.py (commits, built),
      python_env.py (wheels, a uv environment each, lowering in it: lower_env.py)
   ─► session.py: the pool and boards.py (board runs: flash, runner, cases) ─► journal.py
   ─► search.py (confirm, isolate, k-ary search, confirm the culprit; stats.py judges latency)
   ─► report.py: bisect.json, bisect.md, bisect.png
```
"""
