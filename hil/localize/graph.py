"""The graph a localization bisects: a case's exported (for A8W8: quantized) model as one
functional ATen graph, its op nodes in topological order, where it can be cut, and the cut
itself.

A *probe after node k* is the graph cut after k: a program whose outputs are the values
crossing the cut — node k's value first, then every earlier value a later node still uses
(the cut's *frontier*) — with everything else removed as dead code. Returning the whole
frontier, not only node k, makes "the probe after k diverges" monotone in k on graphs with
branches: a wrong value upstream stays visible until nothing downstream uses it, so the first
probe that diverges is the one whose own node computed the first wrong value.

A node is a *clean* cut point when its value is one tensor computed from the inputs (not a
tuple, not a constant) and, for A8W8, when the value exists quantized: the probe ends at the
dequantize after the op's own quantize (the value the next op reads), as in the case's own
graph. An op inside a fused quantization pattern (conv → relu: the conv's float output is
never quantized) has no value of its own on a quantizing backend, and every frontier value
must be clean too. Unclean nodes are not probed; a probe's report names the ones it spans.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from hil.cases.case import REPO_ROOT, Case

QDQ_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
           "dequantize_per_channel", "choose_qparams")
"""quantized_decomposed ops: the quantization's, not the model's (not counted as nodes)."""
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_TORCH_DIR = Path(torch.__file__).resolve().parent


@dataclass(frozen=True)
class GraphNode:
    """One op of the model graph, as the report names it."""

    index: int
    """Position among the graph's op nodes, in topological order (0-based)."""
    name: str
    """The node's name in the exported graph (`hardswish_3`)."""
    op: str
    """The ATen op (`aten.hardswish.default`)."""
    module: str
    """The module path from `nn_module_stack` (`features.0.2`); empty at the top level."""
    module_type: str
    """That module's class (`torch.nn.modules.activation.Hardswish`)."""
    source: str
    """`file:line` of the innermost frame of its stack trace outside torch itself."""
    cut: str | None
    """The node whose value a probe after this node returns (itself, or for A8W8 the
    dequantize after its quantize); None when it cannot be cut cleanly."""
    reason: str = ""
    """Why it cannot be cut (when `cut` is None)."""

    @property
    def op_name(self) -> str:
        """`aten.hardswish.default` → `hardswish`."""
        return op_base(self.op)

    def record(self) -> dict[str, Any]:
        """The node as a results.json entry."""
        return {"index": self.index, "name": self.name, "op": self.op, "op_name": self.op_name,
                "module": self.module, "module_type": self.module_type, "source": self.source}


def op_base(op: str) -> str:
    """`aten.hardswish.default` → `hardswish`; `<built-in function getitem>` → `getitem`;
    in-place variants lose their underscore (`relu_` → `relu`)."""
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    parts = op.split(".")
    name = parts[1] if len(parts) >= 3 else parts[-1]
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _target(node: torch.fx.Node) -> str:
    return str(node.target)


def is_qdq(node: torch.fx.Node) -> bool:
    """A quantize/dequantize node (or qparams computation) of the quantization."""
    return node.op == "call_function" and any(q in _target(node) for q in QDQ_OPS)


def _is_dequantize(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and "dequantize_per_tensor" in _target(node)


def _is_quantize(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and "quantize_per_tensor" in _target(node) and not _is_dequantize(node)


def show_path(path: str) -> str:
    """A source path as a reader recognises it: repo-relative, else from its package
    (`torchvision/models/resnet.py`), else as it is."""
    resolved = Path(path)
    try:
        return resolved.resolve().relative_to(REPO_ROOT).as_posix()
    except (ValueError, OSError):
        pass
    marker = "site-packages/"
    return path.split(marker, 1)[1] if marker in path else path


def source_of(node: torch.fx.Node) -> str:
    """`file:line` of the innermost stack frame outside torch's own package (the model's
    code that called the op), else the innermost frame; empty without a stack trace."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return ""
    outside = [f for f in frames if not Path(f[0]).resolve().is_relative_to(_TORCH_DIR)]
    path, line = (outside or frames)[-1]
    return f"{show_path(path)}:{line}"


def module_of(node: torch.fx.Node) -> tuple[str, str]:
    """(module path, module class) of the innermost `nn_module_stack` entry."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    return path, kind if isinstance(kind, str) else getattr(kind, "__qualname__", str(kind))


def _one_tensor(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


def build_graph(case: Case, flow: str) -> tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]]:
    """The case's model as a functional ATen graph module (A8W8: quantized exactly as the
    case's artifact is: `EnnQuantizer`, the same calibration, `fold_quantize` off on `enn`)
    and the inputs the board runs."""
    from hil.lower.build import calibration_samples, case_samples
    from hil.lower.quantize import quantize_a8w8

    torch.manual_seed(case.seed)
    module = case.factory().eval()
    inputs = case_samples(case).inputs
    if case.precision == "a8w8":
        module = quantize_a8w8(module, inputs, calibration_samples(case), flow != "enn", case.qat)
    graph_module = torch.export.export(module, inputs).run_decompositions({}).module()
    _dequantize_after_quantize(graph_module.graph)
    return graph_module, inputs


def _dequantize_after_quantize(graph: torch.fx.Graph) -> None:
    """Move every dequantize right after its quantize (still a topological order: a
    dequantize reads only its quantize), so a quantized value crosses a cut dequantized."""
    for node in list(graph.nodes):
        if _is_quantize(node):
            for user in reversed([u for u in node.users if _is_dequantize(u)]):
                node.append(user)


def _input_dependent(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose value depends on a graph input (activations, not constants)."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" or any(arg in found for arg in node.all_input_nodes):
            found.add(node)
    return found


def _crossing(graph: torch.fx.Graph, active: set[torch.fx.Node],
              cuts: set[torch.fx.Node]) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """For each node of `cuts`, the activations computed up to it (itself included) that a
    later node still reads, in graph order: one sweep over the graph."""
    nodes = list(graph.nodes)
    order = {node: position for position, node in enumerate(nodes)}
    last_use = {node: max((order[user] for user in node.users), default=-1) for node in nodes}
    live: dict[torch.fx.Node, None] = {}
    found: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for position, node in enumerate(nodes):
        if node in active and node.op != "placeholder":
            live[node] = None
        for value in [v for v in live if last_use[v] <= position and v is not node]:
            del live[value]
        if node in cuts:
            found[node] = list(live)
    return found


class CutPlan:
    """The op nodes of a graph module and, for each clean one, the frontier its probe returns."""

    def __init__(self, graph_module: torch.fx.GraphModule, quantized: bool) -> None:
        self.graph_module = graph_module
        graph = graph_module.graph
        active = _input_dependent(graph)
        order = {node: position for position, node in enumerate(graph.nodes)}
        ops = [n for n in graph.nodes if n.op == "call_function" and not is_qdq(n)]
        self.nodes: list[GraphNode] = []
        values: dict[int, torch.fx.Node] = {}
        for index, node in enumerate(ops):
            value, reason = self._cut_point(node, active, quantized)
            module, module_type = module_of(node)
            self.nodes.append(GraphNode(index, node.name, _target(node), module, module_type,
                                        source_of(node), value.name if value is not None else None, reason))
            if value is not None:
                values[index] = value

        def dequantizes(value: torch.fx.Node) -> list[torch.fx.Node]:
            """The dequantizes of the quantize `value` dequantizes (one per consumer), in
            graph order; [value] for any other node."""
            source = value.args[0] if _is_dequantize(value) and value.args else None
            if not (isinstance(source, torch.fx.Node) and _is_quantize(source)):
                return [value]
            return sorted((u for u in source.users if _is_dequantize(u)), key=order.__getitem__)

        clean_values = set(values.values())
        cut_after = {index: dequantizes(value)[-1] for index, value in values.items()}
        crossing = _crossing(graph, active, set(cut_after.values()))
        self.frontiers: dict[int, tuple[str, ...]] = {}
        for index, value in values.items():
            # one dequantize stands for a quantized value, however many consumers it has
            others = [n for n in dict.fromkeys(dequantizes(c)[0] for c in crossing[cut_after[index]])
                      if n is not value]
            unclean = [node.name for node in others if node not in clean_values]
            if unclean:
                node = self.nodes[index]
                problem = f"the cut would split a value that is not cut cleanly: {', '.join(unclean[:3])}"
                self.nodes[index] = GraphNode(node.index, node.name, node.op, node.module,
                                              node.module_type, node.source, None, problem)
            else:
                self.frontiers[index] = (value.name, *(node.name for node in others))

    @staticmethod
    def _cut_point(node: torch.fx.Node, active: set[torch.fx.Node],
                   quantized: bool) -> tuple[torch.fx.Node | None, str]:
        if not _one_tensor(node):
            kind = type(node.meta.get("val")).__name__
            return None, f"its value is a {kind}, not one tensor"
        if node not in active:
            return None, "a constant (it does not depend on the inputs)"
        if not quantized:
            return node, ""
        quantizes = [u for u in node.users if _is_quantize(u)]
        if quantizes and len(quantizes) == len(node.users):
            dequantized = [u for u in quantizes[0].users if _is_dequantize(u)]
            if dequantized:
                return dequantized[0], ""
        if not node.users or all(u.op == "output" for u in node.users):
            return node, ""
        consumers = ", ".join(sorted(u.name for u in node.users if not _is_quantize(u)))
        return None, f"inside a fused quantization pattern: its float value goes on to {consumers}"

    @property
    def candidates(self) -> list[int]:
        """Indices of the clean cut points, in topological order."""
        return sorted(self.frontiers)

    def record(self) -> dict[str, Any]:
        """JSON-able form (the plan cache): nodes and frontiers."""
        return {"nodes": [asdict(node) for node in self.nodes],
                "frontiers": {str(k): list(v) for k, v in self.frontiers.items()}}


def plan_from_record(record: dict[str, Any]) -> tuple[list[GraphNode], dict[int, tuple[str, ...]]]:
    """Nodes and frontiers back from `CutPlan.record()`."""
    nodes = [GraphNode(**node) for node in record["nodes"]]
    frontiers = {int(k): tuple(v) for k, v in record["frontiers"].items()}
    return nodes, frontiers


def cut_module(graph_module: torch.fx.GraphModule, outputs: Sequence[str]) -> torch.fx.GraphModule:
    """A module returning the values of the nodes named `outputs` (a tuple, in that order),
    with every node they do not need removed. Its inputs are the original ones."""
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    by_name: dict[str, torch.fx.Node] = {}
    for node in graph_module.graph.nodes:
        if node.op == "output":
            break
        if node.op == "call_module" and not node.users:  # export's input guard
            continue
        copies[node] = graph.node_copy(node, lambda arg: copies[arg])
        by_name[node.name] = copies[node]
    missing = [name for name in outputs if name not in by_name]
    if missing:
        raise KeyError(f"no node named {', '.join(missing)} in the graph")
    graph.output(tuple(by_name[name] for name in outputs))
    cut = torch.fx.GraphModule(graph_module, graph)
    cut.graph.eliminate_dead_code()
    cut.recompile()
    return cut


def iterate_values(graph_module: torch.fx.GraphModule,
                   inputs: Sequence[torch.Tensor]) -> Iterator[tuple[torch.fx.Node, Any]]:
    """Run the graph eagerly node by node, yielding (node, value); a value is dropped once
    its last user has run, so memory stays that of one forward pass."""
    interpreter = torch.fx.Interpreter(graph_module)
    interpreter.args_iter = iter(inputs)
    env = interpreter.env
    with torch.no_grad():
        for node in graph_module.graph.nodes:
            if node.op == "output" or (node.op == "call_module" and not node.users):
                continue
            env[node] = interpreter.run_node(node)
            yield node, env[node]
            for done in interpreter.user_to_last_uses.get(node, []):
                env.pop(done, None)
