#!/usr/bin/env python3
"""Check that a release tag agrees with the repository, before anything is built or published:
the tag is `vX.Y.Z`, pyproject.toml's version is X.Y.Z, and CHANGELOG.md has a `## [X.Y.Z]`
section (Keep a Changelog). Prints that section's text (the release notes), or writes it to
--notes FILE; with --github-output, also `version=` and `major=` (e.g. v0) lines
for $GITHUB_OUTPUT. Exit 0 when all agree, 1 with one line per disagreement naming the file.

    scripts/release-check.py v0.9.0
    scripts/release-check.py "$TAG" --notes "$RUNNER_TEMP/notes.md"

.github/workflows/release.yml runs it on every tag push.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TAG = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
VERSION_LINE = re.compile(r'^version\s*=\s*"([^"]*)"\s*$', re.M)
HEADING = re.compile(r"^## \[([^\]]+)\]", re.M)


def project_version(pyproject: Path) -> str | None:
    """The `version` of pyproject.toml's [project] table."""
    text = pyproject.read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0] if "[project]" in text else ""
    match = VERSION_LINE.search(project)
    return match.group(1) if match else None


def changelog_section(changelog: Path, version: str) -> str | None:
    """The text under CHANGELOG.md's `## [version]` heading (to the next `## ` heading), or
    None when there is no such heading."""
    text = changelog.read_text(encoding="utf-8")
    headings = list(HEADING.finditer(text))
    for index, heading in enumerate(headings):
        if heading.group(1) == version:
            end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
            body = text[heading.end():end].split("\n", 1)[1] if "\n" in text[heading.end():end] else ""
            return body.split("\n[", 1)[0].strip() + "\n"  # without a trailing link reference list
    return None


def check(tag: str, root: Path) -> tuple[list[str], str]:
    """The disagreements (one line each) and the release notes."""
    match = TAG.match(tag)
    if match is None:
        return [f"{tag}: not a release tag vX.Y.Z (e.g. v0.9.0)"], ""
    version = ".".join(match.groups())
    problems = []
    found = project_version(root / "pyproject.toml")
    if found != version:
        problems.append(f"pyproject.toml: version is {found!r}, the tag {tag} says {version!r}")
    notes = changelog_section(root / "CHANGELOG.md", version)
    if notes is None:
        problems.append(f"CHANGELOG.md: no `## [{version}]` section for the tag {tag}")
    elif not notes.strip():
        problems.append(f"CHANGELOG.md: the `## [{version}]` section is empty")
    return problems, notes or ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tag", help="the tag pushed, e.g. v0.9.0")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the repository (default: this script's)")
    parser.add_argument("--notes", type=Path, help="write the release notes here")
    parser.add_argument("--github-output", type=Path,
                        help="append version=, major= and the notes file to this $GITHUB_OUTPUT")
    args = parser.parse_args(argv)
    problems, notes = check(args.tag, args.root)
    for problem in problems:
        sys.stderr.write(f"release-check: {problem}\n")
    if problems:
        return 1
    if args.notes:
        args.notes.write_text(notes, encoding="utf-8")
    else:
        sys.stdout.write(notes)
    if args.github_output:
        with args.github_output.open("a", encoding="utf-8") as out:
            out.write(f"version={args.tag[1:]}\nmajor={args.tag.split('.')[0]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
