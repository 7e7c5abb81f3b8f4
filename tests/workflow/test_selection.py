"""Selection and feedback: `hil list`, `--tag`, `--exclude`, a
`--board` typo, localize's own output folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.cases import shard_of
from hil.cli import build_parser, main

TAGGED = str(Path(__file__).resolve().parents[1] / "fixtures" / "tagged.yaml")


def _listed(capsys, *args: str) -> list[str]:
    assert main(["list", "--suite", TAGGED, *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_list_shows_what_a_selection_picks_without_running_it(capsys) -> None:
    assert _listed(capsys) == [
        "tagged.fp32.mlp_a  [tags: mlp,small]", "tagged.fp32.mlp_b  [tags: mlp]",
        "tagged.fp32.mlp_known  [tags: mlp,known; expect: FAIL_MISMATCH]",
        "tagged.fp32.other  [skip: not today]", "4 case(s)"]


def test_tag_and_exclude_narrow_the_selection_and_shards_stay_a_hash_partition(capsys) -> None:
    keys = lambda lines: [line.split()[0] for line in lines[:-1]]  # noqa: E731
    assert keys(_listed(capsys, "--tag", "mlp")) == ["tagged.fp32.mlp_a", "tagged.fp32.mlp_b",
                                                     "tagged.fp32.mlp_known"]
    assert keys(_listed(capsys, "--tag", "sm*", "--tag", "known")) == ["tagged.fp32.mlp_a",
                                                                       "tagged.fp32.mlp_known"]
    assert keys(_listed(capsys, "--tag", "mlp", "--exclude", "*known")) == ["tagged.fp32.mlp_a",
                                                                           "tagged.fp32.mlp_b"]
    every = keys(_listed(capsys))
    for index in (1, 2):
        shard = keys(_listed(capsys, "--exclude", "other", "--shard", f"{index}/2"))
        assert shard == [k for k in every if k != "tagged.fp32.other" and shard_of(k, 2) == index]
    assert main(["list", "--suite", TAGGED, "--tag", "no-such-tag"]) == 3


@pytest.mark.parametrize("typo, suggestion", [("virtul", "'virtual'"), ("Virtual:2", "'virtual:2'")])
def test_a_board_typo_is_refused_with_a_suggestion(capsys, typo, suggestion) -> None:
    assert main(["run", "--board", typo]) == 3
    assert f"did you mean {suggestion}?" in capsys.readouterr().err


def test_localize_writes_to_its_own_folder_by_default() -> None:
    args = build_parser().parse_args(["localize", "--suite", "smoke", "--filter", "add"])
    assert args.out == "hil-localize"
    assert build_parser().parse_args(["run"]).out == "hil-out"
