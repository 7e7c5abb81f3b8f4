"""hil's .pte reader against ExecuTorch's own deserializer, on real lowered programs."""

from __future__ import annotations

import pytest
import torch

from hil.runner.contract import METHOD_ALLOCATOR_BYTES
from hil.runner.pte import ProgramInfo, PteError, read_program

pytestmark = pytest.mark.slow  # lowering three programs: ~10 s


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return torch.relu(y), y.mean(dim=(2, 3))


def _programs() -> dict[str, bytes]:
    import executorch.kernels.quantized  # noqa: F401
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from hil.lower.quantize import quantize_a8w8

    inputs = (torch.randn(1, 3, 8, 8),)
    net = Net().eval()
    found = {}
    for name, module, partitioner in (
        ("xnnpack", net, [XnnpackPartitioner()]),
        ("portable", net, []),
        ("a8w8", quantize_a8w8(net, inputs, [inputs], True), []),
    ):
        exported = torch.export.export(module, inputs)
        found[name] = to_edge_transform_and_lower({"run": exported}, partitioner=partitioner).to_executorch().buffer
    return found


@pytest.fixture(scope="module")
def programs() -> dict[str, bytes]:
    return _programs()


@pytest.mark.parametrize("name", ["xnnpack", "portable", "a8w8"])
def test_reader_agrees_with_executorchs_deserializer(programs: dict[str, bytes], name: str) -> None:
    from executorch.exir._serialize._program import deserialize_pte_binary

    ours = read_program(programs[name])
    theirs = deserialize_pte_binary(programs[name])
    plan = getattr(theirs, "program", theirs).execution_plan[0]
    assert ours.method == plan.name == "run"
    assert ours.backends == tuple(d.id for d in plan.delegates)
    assert ours.operators == tuple(f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators)
    kinds = [type(v.val).__name__ for v in plan.values]
    assert ours.input_kinds == tuple(kinds[i] for i in plan.inputs)
    assert ours.output_kinds == tuple(kinds[i] for i in plan.outputs) == ("Tensor", "Tensor")
    assert ours.planned_buffers == tuple(plan.non_const_buffer_sizes[1:])
    assert 0 < ours.method_allocator_min_bytes < METHOD_ALLOCATOR_BYTES
    assert ours.runner_limits() == []


def test_what_each_flow_leaves_outside_delegates(programs: dict[str, bytes]) -> None:
    assert read_program(programs["xnnpack"]).backends == ("XnnpackBackend",)
    portable = read_program(programs["portable"])
    assert portable.backends == () and "aten::convolution.out" in portable.operators
    a8w8 = read_program(programs["a8w8"]).operators
    assert any(op.startswith("quantized_decomposed::") for op in a8w8)


def test_not_a_program_is_refused() -> None:
    with pytest.raises(PteError, match="ET12"):
        read_program(b"not a flatbuffer" * 8)
    with pytest.raises(PteError):
        read_program(b"\x10\x00\x00\x00ET12" + b"\xff" * 4)


def test_runner_limits_name_non_tensor_values_and_a_too_large_method() -> None:
    info = ProgramInfo("forward", ("forward",), (), (), ("Tensor", "Int"), ("Tensor", "Int"), (),
                       METHOD_ALLOCATOR_BYTES + 1)
    problems = info.runner_limits()
    assert problems[0].startswith("output 1 is of type Int, not a tensor: the runner calls toTensor()")
    assert problems[1].startswith("input 1 is of type Int, not a tensor")
    assert "of the runner's 4 MiB method allocator pool" in problems[2]
