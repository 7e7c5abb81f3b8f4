"""Reporting: the canonical `results.json` (`results`, its schema hil/report/results.schema.json) and its
renderings — JUnit XML (`junit`), the console table (`console`), progress lines (`progress`),
GitHub workflow commands (`github`) and the step summary (`summary`) — plus `merge` of shards,
`compare` of runs with its trend `plot`, and the latency statistics (`stats`)."""
