"""Lowering flows: `enn` (Samsung NPU, needs LITECORE), `xnnpack` and `portable` (host CPU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Lowered:
    """A serialised program and what the partitioner did with its ops."""

    buffer: bytes
    """The `.pte` bytes."""
    delegated_calls: int
    """Number of `executorch_call_delegate` calls in the program."""
    delegated_ops: tuple[str, ...]
    """Op names inside delegates (sorted, with repeats)."""
    undelegated_ops: tuple[str, ...]
    """Op names left outside any delegate (sorted, with repeats)."""


def _edge_compile_config(flow: str) -> Any:
    if flow == "enn":
        from executorch.backends.samsung.utils.export_utils import get_edge_compile_config

        return get_edge_compile_config()
    from executorch.exir import EdgeCompileConfig

    return EdgeCompileConfig()


def _partitioners(flow: str, chipset: str) -> Any:
    """The flow's partitioners. For `enn`, as `to_edge_transform_and_lower_to_enn` of
    `executorch/backends/samsung/utils/export_utils.py` passes them: `{"forward":
    [EnnPartitioner(compile_specs)]}` with `compile_specs = [gen_samsung_backend_compile_spec
    (chipset)]` (examples/samsung/aot_compiler.py); pinned by tests/lower/test_upstream_path.py."""
    if flow == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]
    if flow == "enn":
        from hil.sdk import require_enn_adaptor

        require_enn_adaptor()
        from executorch.backends.samsung.partition.enn_partitioner import EnnPartitioner
        from executorch.backends.samsung.serialization.compile_options import (
            gen_samsung_backend_compile_spec,
        )

        compile_specs = [gen_samsung_backend_compile_spec(chipset)]
        return {"forward": [EnnPartitioner(compile_specs)]}
    return []


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    return name.split("::")[-1]


def _graph_ops(graph: torch.fx.Graph) -> list[str]:
    return [
        _op_name(node.target)
        for node in graph.nodes
        if node.op == "call_function" and _op_name(node.target) != "getitem"
    ]


def lower_program(exported: torch.export.ExportedProgram, flow: str, chipset: str) -> Lowered:
    """Lower an exported program for `flow` and serialise it."""
    # Host flows run quantized graphs with the quantized kernels registered.
    import executorch.kernels.quantized  # noqa: F401
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(
        exported,
        partitioner=_partitioners(flow, chipset),
        compile_config=_edge_compile_config(flow),
    )
    graph_module = edge.exported_program().graph_module
    delegated: list[str] = []
    undelegated: list[str] = []
    calls = 0
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target)
        if name == "executorch_call_delegate":
            calls += 1
            lowered_module = getattr(graph_module, node.args[0].target)
            delegated.extend(_graph_ops(lowered_module.original_module.graph))
        elif name != "getitem":
            undelegated.append(name)
    program = edge.to_executorch()
    return Lowered(
        buffer=program.buffer,
        delegated_calls=calls,
        delegated_ops=tuple(sorted(delegated)),
        undelegated_ops=tuple(sorted(undelegated)),
    )
