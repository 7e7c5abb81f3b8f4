"""Case selection: suites, filters, precisions and stable shards."""

from pathlib import Path

import pytest

from hil.cases import expand_precisions, load_suite, parse_shard, select, shard_of
from hil.errors import UsageError


def test_smoke_suite_has_the_required_ops_and_a_model():
    ids = [c.id for c in load_suite("smoke")]
    for op in ("conv2d", "linear", "add", "softmax", "tiny_cnn"):
        assert any(i.startswith(op) for i in ids), op
    assert len(ids) >= 6
    assert all(c.precision == "fp32" for c in load_suite("smoke"))


def test_cases_point_at_their_definition_line():
    case = load_suite("smoke")[0]
    assert case.file == "hil/cases/smoke.py"
    repo = Path(__file__).resolve().parents[2]
    lines = (repo / case.file).read_text().splitlines()
    assert "_case(" in lines[case.line - 1]


def test_shards_partition_the_cases_and_are_stable():
    cases = load_suite("smoke")
    shards = [select(cases, [], (i, 3)) for i in (1, 2, 3)]
    keys = [c.key for shard in shards for c in shard]
    assert sorted(keys) == sorted(c.key for c in cases)
    assert len(keys) == len(set(keys))
    # stable: the shard of a key does not depend on the other cases
    assert shard_of("smoke.fp32.add", 3) == shard_of("smoke.fp32.add", 3)
    assert [c.key for c in select(cases[::-1], [], (2, 3))] == [c.key for c in shards[1]][::-1]


def test_filter_matches_id_or_full_key():
    cases = load_suite("smoke")
    assert [c.id for c in select(cases, ["conv2d*"], (1, 1))] == ["conv2d_3x3"]
    assert [c.id for c in select(cases, ["smoke.fp32.add"], (1, 1))] == ["add"]


@pytest.mark.parametrize("text", ["3/2", "0/2", "a/b", "1", "1/0", "-1/2"])
def test_bad_shard_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--shard"):
        parse_shard(text)


def test_unknown_suite_and_precision_are_usage_errors():
    with pytest.raises(UsageError, match="--suite nope: no such suite"):
        load_suite("nope")
    with pytest.raises(UsageError, match="--precision"):
        expand_precisions(load_suite("smoke"), "int4")
