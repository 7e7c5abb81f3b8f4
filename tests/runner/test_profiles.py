"""Runner profiles: what each runner links (from the executorch wheel's kernel lists), what it
refuses, which flow a run may choose, and how a board's profile is learnt."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.runner.profiles import (
    PROFILES,
    BoardRunner,
    ProfileChoice,
    choose_flow,
    choose_profile,
    flow_refusal,
    refusal,
)
from hil.runner.pte import ProgramInfo

UPSTREAM, HIL = PROFILES["upstream"], PROFILES["hil"]


def program(backends: tuple[str, ...] = (), operators: tuple[str, ...] = ()) -> ProgramInfo:
    return ProgramInfo("forward", ("forward",), backends, operators, ("Tensor",), ("Tensor",), (), 1000)


def test_kernel_sets_come_from_the_wheels_libraries() -> None:
    upstream, hil = UPSTREAM.operators(), HIL.operators()
    assert {"aten::convolution.out", "aten::add.out", "dim_order_ops::_to_dim_order_copy.out",
            "executorch_prim::et_view.default"} <= upstream
    assert not any(op.startswith("quantized_decomposed::") for op in upstream)
    assert {"quantized_decomposed::quantize_per_tensor.out",
            "quantized_decomposed::dequantize_per_channel.out"} <= hil
    assert upstream < hil


def test_refusals_name_what_load_method_would() -> None:
    xnnpack = program(("XnnpackBackend",), ("aten::mean.out",))
    assert refusal(UPSTREAM, xnnpack).backends == ("XnnpackBackend",)
    assert refusal(HIL, xnnpack) is None
    enn = program(("EnnBackend",))
    assert refusal(UPSTREAM, enn) is None  # a real board with ENN loads it
    assert refusal(UPSTREAM, enn, virtual=True).unavailable == ("EnnBackend",)  # no NPU here
    quantized = program((), ("aten::add.out", "quantized_decomposed::quantize_per_tensor.out"))
    assert refusal(UPSTREAM, quantized).operators == ((1, "quantized_decomposed::quantize_per_tensor.out"),)
    assert refusal(HIL, quantized) is None
    assert str(refusal(UPSTREAM, quantized)) == "missing operator(s): quantized_decomposed::quantize_per_tensor.out"


@pytest.mark.parametrize(
    ("profile", "flow", "precision", "virtual", "runs"),
    [
        ("upstream", "enn", "fp32", False, True),
        ("upstream", "enn", "a8w8", False, True),
        ("upstream", "enn", "fp32", True, False),
        ("upstream", "xnnpack", "fp32", False, False),
        ("upstream", "portable", "fp32", True, True),
        ("upstream", "portable", "a8w8", True, False),
        ("hil", "xnnpack", "a8w8", True, True),
        ("hil", "portable", "a8w8", False, True),
        ("hil", "enn", "a8w8", False, True),
        ("hil", "enn", "fp32", True, False),
    ],
)
def test_which_flows_a_board_can_run(profile: str, flow: str, precision: str, virtual: bool, runs: bool) -> None:
    assert (flow_refusal(PROFILES[profile], flow, precision, virtual) is None) == runs


def board(name: str, profile: str, virtual: bool) -> BoardRunner:
    return BoardRunner(name, ProfileChoice(PROFILES[profile], "test"), virtual)


NO_SDK = "LITECORE SDK not found: set EXYNOS_AI_LITECORE_ROOT ..."


def test_auto_picks_enn_only_with_the_sdk_and_every_board_able() -> None:
    real = [board("r1", "upstream", False), board("r2", "hil", False)]
    assert choose_flow("auto", real, ["fp32", "a8w8"], None)[0] == "enn"
    assert choose_flow("auto", [*real, board("v", "hil", True)], ["fp32"], None)[0] == "portable"
    assert choose_flow("auto", [real[1], board("v", "hil", True)], ["fp32"], None)[0] == "xnnpack"
    flow, why = choose_flow("auto", [board("v", "hil", True)], ["fp32", "a8w8"], NO_SDK)
    assert (flow, why) == ("xnnpack", "auto: LITECORE SDK not usable -> xnnpack, which every board's "
                                      "runner can execute")


def test_auto_falls_back_to_what_upstream_runners_can_execute() -> None:
    upstream = [board("r1", "upstream", False)]
    assert choose_flow("auto", upstream, ["fp32"], NO_SDK)[0] == "portable"
    with pytest.raises(UsageError) as refused:
        choose_flow("auto", upstream, ["fp32", "a8w8"], NO_SDK)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("--flow auto: no flow runs on every board: LITECORE SDK not usable; r1 (runner "
                              "profile upstream")
    assert "cannot run portable a8w8: its runner has no quantized kernels for A8W8" in message
    assert "ways out: flow enn with the LITECORE SDK" in message and "--runner-profile hil" in message


def test_an_explicit_flow_is_checked_against_every_board() -> None:
    boards = [board("v0", "hil", True), board("v1", "upstream", True)]
    with pytest.raises(UsageError, match=r"^--flow xnnpack: v1 \(runner profile upstream.*cannot run xnnpack fp32: "
                                         r"its runner has no XnnpackBackend delegate"):
        choose_flow("xnnpack", boards, ["fp32"], None)
    assert choose_flow("portable", boards, ["fp32"], None) == ("portable", "requested: portable")
    with pytest.raises(UsageError, match="^LITECORE SDK not found"):
        choose_flow("enn", boards, ["fp32"], NO_SDK)
    with pytest.raises(UsageError, match="a virtual board has no NPU"):
        choose_flow("enn", boards, ["fp32"], None)


def test_a_boards_profile_is_learnt_first_match_wins(tmp_path: Path) -> None:
    runner = tmp_path / "enn_executor_runner"
    runner.write_bytes(b"\x7fELF runner")
    assert choose_profile(None, None, None, runner).source.startswith("unknown runner (no enn_executor_runner")
    (tmp_path / "enn_executor_runner.profile.json").write_text(json.dumps(
        {"profile": "hil", "sha256": hashlib.sha256(runner.read_bytes()).hexdigest()}))
    assert choose_profile(None, None, None, runner).profile is HIL
    assert choose_profile(None, "upstream", None, runner).source == "inventory"
    assert choose_profile("upstream", "hil", "hil", runner).source == "--runner-profile"
    assert choose_profile(None, None, "upstream", None) == ProfileChoice(UPSTREAM, "virtual board")
    assert choose_profile(None, None, None, None).profile is UPSTREAM
    with pytest.raises(UsageError, match="--runner-profile: unknown runner profile 'fast'"):
        choose_profile("fast", None, None, None)
