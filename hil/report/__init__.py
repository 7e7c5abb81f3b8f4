"""Reporting: the canonical `results.json` (`results`) and its renderings — JUnit XML
(`junit`) and the console table (`console`). See docs/results-json.md for the schema."""
