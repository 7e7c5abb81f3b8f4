"""What ExecuTorch 1.5.1's ENN partitioner keeps, computed without the vendor SDK.

`EnnPartitioner` (`executorch/backends/samsung/partition/enn_partitioner.py`) decides with
Python alone which edge nodes go to the NPU:

- `ops_to_not_decompose()` names the aten ops kept whole by `to_edge_transform_and_lower`
  (e.g. `aten.layer_norm.default`); everything else is decomposed to core aten first
  (`rms_norm` too: `RecomposeRmsNorm` puts it back only inside the backend's preprocess);
- `EnnOperatorSupport.is_node_supported()` accepts a `call_function` node whose target is in
  `SUPPORTED_OPS` or whose name has a registered node visitor (`builders/op_*.py`), and
  otherwise asks `PyEnnWrapper.IsNodeSupportedByBackend()` — which returns `false`
  (`backends/samsung/aot/PyEnnWrapperAdaptor.h`, ExecuTorch main);
- `generate_partitions_from_list_of_nodes(..., allows_single_node_partition=True)` then puts
  every supported node into a partition.

So the nodes kept are exactly the supported ones, and that needs no SDK. What does need it
is importing those modules: they import the SDK-built `PyEnnWrapperAdaptor` and
`PyGraphWrapperAdaptor` at the top. `without_sdk()` inserts two modules named as fakes for
the import only (and only when the real ones are missing). The fakes are never asked anything: only
plain data is read (`SUPPORTED_OPS`, the visitors' target names, `ops_to_not_decompose`, the
edge compile config), and `is_node_supported` is mirrored below, line for line, with the
wrapper's constant answer. What cannot be checked here: whether the NPU compiler accepts
each kept node (shapes, attributes) — preprocess and the SDK decide that on flow `enn`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch

ADAPTORS = ("PyEnnWrapperAdaptor", "PyGraphWrapperAdaptor")
"""The SDK-built modules of `executorch.backends.samsung.python`."""
PACKAGE = "executorch.backends.samsung.python"
QDQ_PREFIXES = ("quantize_per_", "dequantize_per_")
"""Short names of the quantize/dequantize ops (A8W8 graphs add them around every op)."""
DELEGATION_INPUTS = ("cases/ops.py", "cases/ops_yolo26.py", "cases/op_modules.py",
                     "cases/upstream_modules.py", "cases/case.py", "lower/enn_partition.py",
                     "lower/quantize.py")
"""hil's sources a case's derived delegation depends on (paths in the `hil` package): the ops
cases' definitions and modules, the Case record (seeds, inputs), this mirror of the
partitioner, and the A8W8 quantization that shapes the graph it sees."""


class _FakeEnnWrapper:
    """Stands in for the SDK's `PyEnnWrapper` when upstream code is exercised in tests: what
    the C++ does without compiling anything (IsNodeSupportedByBackend is `return false;`)."""

    def Init(self, compile_options: bytes) -> None:  # noqa: N802 - upstream's method names
        """Accept the compile options."""

    def IsNodeSupportedByBackend(self) -> bool:  # noqa: N802
        """The C++ answer: false."""
        return False

    def Destroy(self) -> None:  # noqa: N802
        """Nothing to free."""


def _fake_adaptor(name: str) -> types.ModuleType:
    module = types.ModuleType(f"{PACKAGE}.{name}", f"FAKE {name}: hil stands in for the SDK-built "
                              "module to import upstream's partitioner; it compiles nothing")
    module.EnnWrapper = _FakeEnnWrapper  # type: ignore[attr-defined]
    return module


def sdk_adaptor_importable() -> bool:
    """True when the real `PyEnnWrapperAdaptor` imports (LITECORE and its built module)."""
    try:
        importlib.import_module(f"{PACKAGE}.PyEnnWrapperAdaptor")
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def without_sdk() -> Iterator[None]:
    """Import ENN modules inside this block even without the SDK: fake adaptor modules are
    put in `sys.modules` (only when the real ones do not import) and taken out on leaving, so
    nothing imported later finds them (`hil.sdk` still says the SDK is missing). Modules
    imported inside the block keep their reference to the fakes; hil only reads data from
    them, and a real ENN lowering refuses to start without the SDK before using them."""
    if sdk_adaptor_importable():
        yield
        return
    package = types.ModuleType(PACKAGE, "FAKE package: see hil.lower.enn_partition")
    package.__path__ = []  # type: ignore[attr-defined]
    fakes = {PACKAGE: package, **{f"{PACKAGE}.{name}": _fake_adaptor(name) for name in ADAPTORS}}
    sys.modules.update(fakes)
    try:
        yield
    finally:
        for name, module in fakes.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


@dataclass(frozen=True)
class EnnRules:
    """The partitioner's data, read from the installed ExecuTorch."""

    supported_ops: tuple[Any, ...]
    """`enn_partitioner.SUPPORTED_OPS`: edge ops the backend's preprocess rewrites."""
    visitor_targets: frozenset[str]
    """Names with a registered node visitor (`aten.convolution.default`, `getitem`, ...)."""
    ops_to_not_decompose: Callable[[Any], tuple[list[Any], Any]]
    """Upstream's `EnnPartitioner.ops_to_not_decompose` (bound)."""
    edge_compile_config: Any
    """`export_utils.get_edge_compile_config()`."""


@functools.lru_cache(maxsize=1)
def enn_rules() -> EnnRules:
    """Read the partitioner's rules from the installed executorch (see the module doc)."""
    with without_sdk():
        from executorch.backends.samsung.builders import node_visitor
        from executorch.backends.samsung.partition import enn_partitioner
        from executorch.backends.samsung.serialization.compile_options import (
            gen_samsung_backend_compile_spec,
        )
        from executorch.backends.samsung.utils.export_utils import get_edge_compile_config

        partitioner = enn_partitioner.EnnPartitioner([gen_samsung_backend_compile_spec("E9955")])
        return EnnRules(
            supported_ops=tuple(enn_partitioner.SUPPORTED_OPS),
            visitor_targets=frozenset(node_visitor._node_visitor_dict),
            ops_to_not_decompose=partitioner.ops_to_not_decompose,
            edge_compile_config=get_edge_compile_config(),
        )


def _op_support(rules: EnnRules) -> Any:
    from torch.fx.passes.operator_support import OperatorSupportBase

    class EnnSupport(OperatorSupportBase):
        """Mirror of `EnnOperatorSupport.is_node_supported` (enn_partitioner.py)."""

        def is_node_supported(self, _: Any, node: torch.fx.Node) -> bool:
            if node.op != "call_function":
                return False
            if node.target in rules.supported_ops or node.target.__name__ in rules.visitor_targets:
                return True
            return False  # PyEnnWrapper.IsNodeSupportedByBackend(): `return false;`

    return EnnSupport()


def enn_operator_support() -> Any:
    """An `OperatorSupportBase` answering as the ENN partitioner does."""
    return _op_support(enn_rules())


def kept_nodes(exported: torch.export.ExportedProgram,
               support: Callable[[torch.export.ExportedProgram], Any] | None = None) -> list[str]:
    """The edge op names (`aten.layer_norm.default`, `getitem`, ...) of the nodes the ENN
    partitioner would put on the NPU, in graph order: the program is taken to edge as
    `to_edge_transform_and_lower` does with upstream's partitioner and compile config, and
    partitioned with its rules (or with `support(edge_program)`); nothing is lowered."""
    return edge_nodes(exported, support)[1]


def edge_ops(exported: torch.export.ExportedProgram) -> set[str]:
    """The short names of every op of the program's edge graph as the ENN partitioner sees
    it (kept by the partitioner or not)."""
    return {short_name(name) for name in edge_nodes(exported, None)[0]}


def edge_nodes(exported: torch.export.ExportedProgram,
                support: Callable[[torch.export.ExportedProgram], Any] | None) -> tuple[list[str], list[str]]:
    """(the edge op name of every call of the edge graph, of the kept ones), in graph order
    (see `kept_nodes`)."""
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import (
        generate_partitions_from_list_of_nodes,
    )
    from executorch.exir.backend.partitioner import Partitioner, PartitionResult  # noqa: F401

    rules = enn_rules()
    seen: list[str] = []
    kept: list[str] = []

    class Recorder(Partitioner):
        """Takes upstream's ops_to_not_decompose and partition rule, records, and stops the
        lowering there (ops kept whole and not delegated would fail its sanity check)."""

        def ops_to_not_decompose(self, ep: Any) -> tuple[list[Any], Any]:
            return rules.ops_to_not_decompose(ep)

        def partition(self, ep: torch.export.ExportedProgram) -> PartitionResult:
            op_support = support(ep) if support is not None else _op_support(rules)
            partitions = generate_partitions_from_list_of_nodes(ep.graph_module, op_support=op_support)
            inside = {node for partition in partitions for node in partition.nodes}
            calls = [node for node in ep.graph_module.graph.nodes if node.op == "call_function"]
            seen.extend(node.target.__name__ for node in calls)
            kept.extend(node.target.__name__ for node in calls if node in inside)
            raise _Partitioned

    with contextlib.suppress(_Partitioned):
        to_edge_transform_and_lower(exported, partitioner=[Recorder()],
                                    compile_config=rules.edge_compile_config)
    return seen, kept


class _Partitioned(Exception):
    """Raised by the recording partitioner once it has seen the edge graph."""


def short_name(edge_name: str) -> str:
    """`aten.convolution.default` -> `convolution` (the names cases expect)."""
    parts = edge_name.split(".")
    return parts[1] if len(parts) > 1 else edge_name


def expected_delegation(exported: torch.export.ExportedProgram) -> tuple[str, ...]:
    """The short names of the ops the ENN partitioner keeps (sorted, unique; `getitem`,
    which only unpacks tuples, left out)."""
    return tuple(sorted({short_name(n) for n in kept_nodes(exported)} - {"getitem"}))


def case_program(case: Any) -> torch.export.ExportedProgram:
    """The case's program as the partitioner gets it at the case's precision: the module
    built and, for A8W8, quantized as flow `enn` does (one calibration batch: which ops are
    kept does not depend on the values), then exported."""
    from hil.lower.build import calibration_samples, case_samples
    from hil.lower.quantize import quantize_a8w8

    torch.manual_seed(case.seed)
    module = case.factory().eval()
    inputs = case_samples(case).inputs
    if case.precision == "a8w8":
        module = quantize_a8w8(module, inputs, calibration_samples(case)[:1], fold_quantize=False,
                               train=case.qat)
    return torch.export.export(module, inputs)


def case_delegation(case: Any) -> tuple[str, ...]:
    """What the ENN partitioner keeps of `case` at its precision (`expected_delegation` of
    `case_program`)."""
    return expected_delegation(case_program(case))


def delegation_inputs_digest(package: Path | None = None) -> str:
    """sha256 of what `case_delegation` depends on: the DELEGATION_INPUTS sources (of the
    `hil` package folder `package`, default this one) and the installed executorch and torch
    versions. scripts/derive-ops-delegation.py stores it beside the derivation; a stored
    digest that differs means the derivation is stale."""
    package = package or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for name in DELEGATION_INPUTS:
        digest.update(name.encode() + b"\0" + (package / name).read_bytes() + b"\0")
    for dist in ("executorch", "torch"):
        digest.update(f"{dist}=={version(dist)}\0".encode())
    return digest.hexdigest()
