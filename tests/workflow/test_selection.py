"""Selection and feedback (issue 22 items 9, 10): `hil list`, `--tag`, `--exclude`, a
`--board` typo, localize's own output folder."""

from __future__ import annotations

import pytest

from hil.cases import shard_of
from hil.cli import build_parser, main


def _listed(capsys, *args: str) -> list[str]:
    assert main(["list", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_list_shows_what_a_selection_picks_without_running_it(capsys) -> None:
    lines = _listed(capsys, "--suite", "smoke")
    assert lines[-1] == f"{len(lines) - 1} case(s)" and "smoke.fp32.add" in lines
    known = _listed(capsys, "--suite", "ops", "--precision", "a8w8", "--filter", "group_norm")
    assert known[0].startswith("ops.a8w8.group_norm  [tags: op:group_norm") and "expect: FAIL_QUANTIZE" in known[0]


def test_tag_and_exclude_narrow_the_selection_and_shards_stay_a_hash_partition(capsys) -> None:
    tagged = _listed(capsys, "--suite", "ops", "--tag", "op:add")[:-1]
    assert tagged and all(line.startswith("ops.fp32.add") for line in tagged)
    rest = _listed(capsys, "--suite", "ops", "--tag", "op:add", "--exclude", "add_broadcast")[:-1]
    assert [x.split()[0] for x in tagged if x not in rest] == ["ops.fp32.add_broadcast"]
    shard = _listed(capsys, "--suite", "ops", "--tag", "op:add", "--shard", "1/2")[:-1]
    assert [x.split()[0] for x in shard] == [x.split()[0] for x in tagged if shard_of(x.split()[0], 2) == 1]
    assert main(["list", "--suite", "smoke", "--tag", "no-such-tag"]) == 3


@pytest.mark.parametrize("typo, suggestion", [("virtul", "'virtual'"), ("Virtual:2", "'virtual:2'")])
def test_a_board_typo_is_refused_with_a_suggestion(capsys, typo, suggestion) -> None:
    assert main(["run", "--board", typo]) == 3
    assert f"did you mean {suggestion}?" in capsys.readouterr().err


def test_localize_writes_to_its_own_folder_by_default() -> None:
    args = build_parser().parse_args(["localize", "--suite", "smoke", "--filter", "add"])
    assert args.out == "hil-localize"
    assert build_parser().parse_args(["run"]).out == "hil-out"
