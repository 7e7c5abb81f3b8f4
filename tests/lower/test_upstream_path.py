"""hil's ENN path is upstream's (`executorch/backends/samsung/utils/export_utils.py`):
A8W8 quantization gives the same graph as `quantize_module` (SDPA decomposed before
`prepare_pt2e`), and flow enn hands `to_edge_transform_and_lower` the same program,
partitioners and compile config as `to_edge_transform_and_lower_to_enn`. The upstream module
is imported with the SDK adaptors faked for the import; lowering itself is stopped at the
call (it needs the SDK)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from hil.lower.enn_partition import without_sdk
from hil.lower.quantize import quantize_a8w8

pytestmark = pytest.mark.slow  # quantizes and exports an attention block twice: ~15 s


class AttentionBlock(nn.Module):
    """A conv stem and one self-attention layer through `scaled_dot_product_attention`."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.stem(x).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(tokens).chunk(3, dim=-1)
        heads = [t.unflatten(-1, (2, 8)).transpose(1, 2) for t in (q, k, v)]
        attended = nn.functional.scaled_dot_product_attention(*heads).transpose(1, 2).flatten(2)
        return self.out(attended.mean(dim=1))


def _example(seed: int) -> tuple[torch.Tensor]:
    return (torch.rand((2, 3, 16, 16), generator=torch.Generator().manual_seed(seed)),)


@pytest.fixture(scope="module")
def export_utils():
    with without_sdk():
        from executorch.backends.samsung.utils import export_utils

        yield export_utils


def _code(module: torch.fx.GraphModule) -> str:
    return module.graph.python_code("self").src


def test_a8w8_is_upstreams_quantize_module_with_sdpa_decomposed(export_utils) -> None:
    from executorch.backends.samsung.quantizer.quantizer import Precision

    calibration = [_example(i) for i in range(1, 4)]
    torch.manual_seed(0)
    module = AttentionBlock().eval()
    upstream = export_utils.quantize_module(module, _example(0), calibration, Precision.A8W8)
    ours = quantize_a8w8(module, _example(0), calibration, fold_quantize=False)
    assert _code(ours) == _code(upstream)
    assert "scaled_dot_product_attention" not in _code(ours)
    torch.testing.assert_close(ours(*_example(9)), upstream(*_example(9)), rtol=0, atol=0)


# to_edge_transform_and_lower's parameters in order (executorch/exir/program/_program.py; its
# logging decorator hides the signature): upstream main passes the ENN pass list positionally.
_LOWER_PARAMETERS = ("programs", "transform_passes", "partitioner", "constant_methods", "compile_config",
                     "generate_etrecord")


class _Stop(Exception):
    pass


def _lowering_calls(export_utils, monkeypatch, module: nn.Module, example) -> tuple[dict, dict]:
    """The arguments (by name) upstream's `to_edge_transform_and_lower_to_enn` and hil's flow
    enn give `to_edge_transform_and_lower`, both stopped at that call."""
    import executorch.exir
    from executorch.backends.samsung.serialization.compile_options import (
        gen_samsung_backend_compile_spec,
    )

    from hil.lower import flows

    calls: list[dict] = []

    def record(*args, **kwargs):
        calls.append({**dict(zip(_LOWER_PARAMETERS, args, strict=False)), **kwargs})
        raise _Stop

    monkeypatch.setattr(export_utils, "to_edge_transform_and_lower", record)
    with pytest.raises(_Stop):
        export_utils.to_edge_transform_and_lower_to_enn(
            module, example, compile_specs=[gen_samsung_backend_compile_spec("E9955")])
    monkeypatch.setattr(executorch.exir, "to_edge_transform_and_lower", record)
    monkeypatch.setattr("hil.sdk.require_enn_adaptor", lambda: None)
    with without_sdk(), pytest.raises(_Stop):
        flows.lower_program(torch.export.export(module, example), "enn", "E9955")
    upstream, ours = calls
    return upstream, ours


def _pass_names(arguments: dict) -> list[str]:
    return [type(p).__name__ if not isinstance(p, type) else p.__name__
            for p in arguments.get("transform_passes") or ()]


def _same_passes(upstream: dict, ours: dict) -> None:
    assert _pass_names(ours) == _pass_names(upstream), (
        f"upstream's ENN lowering runs the passes {_pass_names(upstream)} (export_utils."
        f"get_enn_pass_list, when the pinned wheel moved) and hil's flow enn runs {_pass_names(ours)}: "
        "hand hil/lower/flows.py the same transform_passes")


def test_flow_enn_lowers_as_to_edge_transform_and_lower_to_enn(export_utils, monkeypatch) -> None:
    torch.manual_seed(0)
    module = AttentionBlock().eval()
    upstream, ours = _lowering_calls(export_utils, monkeypatch, module, _example(0))
    upstream_program, our_program = upstream.pop("programs"), ours.pop("programs")
    assert _code(our_program.graph_module) == _code(upstream_program.graph_module)
    _same_passes(upstream, ours)
    upstream.pop("transform_passes", None)
    ours.pop("transform_passes", None)
    assert sorted(ours) == sorted(upstream) == ["compile_config", "partitioner"]
    assert dataclasses.asdict(ours["compile_config"]) == dataclasses.asdict(upstream["compile_config"])
    assert list(ours["partitioner"]) == list(upstream["partitioner"]) == ["forward"]
    (our_partitioner,), (upstream_partitioner,) = ours["partitioner"]["forward"], upstream["partitioner"]["forward"]
    assert type(our_partitioner).__name__ == type(upstream_partitioner).__name__ == "EnnPartitioner"
    assert [(s.key, s.value) for s in our_partitioner.compile_specs] == [
        (s.key, s.value) for s in upstream_partitioner.compile_specs]


def test_a_pass_list_upstream_adds_when_the_wheel_moves_is_caught(export_utils, monkeypatch) -> None:
    # ExecuTorch main (after 1.5.1) lowers with get_enn_pass_list() (RemoveUselessOpPass,
    # RemoveCloneOpsTransform, FuseConvActPass) passed positionally: stand its export_utils in
    class FuseConvActPass:
        pass

    def main_to_edge_transform_and_lower_to_enn(module, inputs, custom_pass_config=None, compile_specs=None):
        program = torch.export.export(module, inputs)
        return export_utils.to_edge_transform_and_lower(
            program, [FuseConvActPass()], {"forward": [export_utils.EnnPartitioner(compile_specs)]},
            compile_config=export_utils.get_edge_compile_config())

    monkeypatch.setattr(export_utils, "to_edge_transform_and_lower_to_enn", main_to_edge_transform_and_lower_to_enn)
    upstream, ours = _lowering_calls(export_utils, monkeypatch, nn.Linear(4, 2).eval(), (torch.rand(1, 4),))
    with pytest.raises(AssertionError, match=r"runs the passes \['FuseConvActPass'\].*hil's flow enn runs \[\]"):
        _same_passes(upstream, ours)
