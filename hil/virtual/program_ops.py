"""Which ops a `.pte` executes, by name: what the `miscompute,op=NAME` fault matches.

A program's kernels outside delegates are in its operator list (`aten::hardswish.out` →
`hardswish`). A delegate's own ops are not: they are inside its payload, in the backend's own
format. This module reads them from the payload where that format is public, so the fault
looks at what the runner is about to execute and nothing else:

- `XnnpackBackend`: the payload is `XH00` header + the `XNNGraph` flatbuffer of upstream's
  `backends/xnnpack/serialization/schema.fbs` (header layout in `xnnpack_graph_serialize.py`
  `XNNHeader`); each `XNode`'s union type names its op (`XNNHardswish` → `hardswish`). The
  union's member order is read from the `schema.fbs` installed with ExecuTorch, so it follows
  the serializer that wrote the payload.
- `EnnBackend` and any other: opaque (a vendor graph); only the delegate's presence is known.
  The virtual board cannot execute an ENN delegate anyway (no NPU).

Why not a side file with the host's `delegated_ops` beside the `.pte`: that would be what
the host believes it lowered, not what the program holds, and a program pushed without it
would silently escape the fault. Reading the payload needs nothing but the program.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import struct
from pathlib import Path

from hil.runner.pte import PteError, delegate_payloads, read_program

log = logging.getLogger(__name__)

XNNPACK_BACKEND = "XnnpackBackend"
_XNN_MAGIC = b"XH00"
_XNN_ALIASES = {
    "conv2d": ("convolution", "conv2d"),
    "depthwise_conv2d": ("convolution", "conv2d"),
    "conv_transpose2d": ("convolution", "conv_transpose2d"),
    "fully_connected": ("linear", "addmm", "mm"),
    "multiply": ("mul",),
    "subtract": ("sub",),
    "square_root": ("sqrt",),
    "reciprocal_square_root": ("rsqrt",),
    "ceiling": ("ceil",),
    "negate": ("neg",),
    "max_pooling2d": ("max_pool2d",),
    "avg_pooling2d": ("avg_pool2d",),
    "global_avg_pooling2d": ("mean", "adaptive_avg_pool2d"),
    "arg_max_pooling2d": ("max_pool2d_with_indices",),
    "reshape": ("view", "reshape"),
    "transpose": ("permute",),
    "resize_bilinear2d": ("upsample_bilinear2d",),
    "constant_pad": ("constant_pad_nd",),
    "batch_matrix_multiply": ("bmm",),
    "slice": ("slice_copy", "slice"),
    "concatenate2": ("cat",), "concatenate3": ("cat",), "concatenate4": ("cat",),
    "concatenate5": ("cat",),
    "leaky_re_lu": ("leaky_relu",),
    "p_re_lu": ("prelu",),
    "clamp": ("clamp", "hardtanh", "relu"),
    "convert": ("_to_copy",),
    "copy": ("clone",),
}
"""XNNPACK node names (snake case, `XNN`/`Static` dropped) whose aten name differs."""


def operator_base(name: str) -> str:
    """`aten::hardswish.out` → `hardswish`; `aten.add.Tensor` → `add`."""
    return name.split("::")[-1].removeprefix("aten.").split(".")[0]


def _snake(name: str) -> str:
    name = name.removeprefix("XNN").removeprefix("Static")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def xnn_op_names(member: str) -> tuple[str, ...]:
    """The names a `XNodeUnion` member answers to: `XNNHardswish` → (`hardswish`,),
    `XNNFullyConnected` → (`fully_connected`, `linear`, `addmm`, `mm`)."""
    snake = _snake(member)
    return (snake, *_XNN_ALIASES.get(snake, ()))


@functools.lru_cache(maxsize=1)
def xnode_union_members() -> tuple[str, ...]:
    """`union XNodeUnion`'s members in order (index 0 is the union's NONE) from the installed
    ExecuTorch's `backends/xnnpack/serialization/schema.fbs`; empty when it is not there."""
    spec = importlib.util.find_spec("executorch")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        schema = Path(root) / "backends" / "xnnpack" / "serialization" / "schema.fbs"
        if schema.is_file():
            body = re.search(r"union\s+XNodeUnion\s*\{([^}]*)\}", schema.read_text(encoding="utf-8"))
            if body:
                text = re.sub(r"//[^\n]*", "", body.group(1))
                return ("NONE", *re.findall(r"\b(XNN\w+)\s*(?::[^,]*)?,?", text))
    log.warning("XNNPACK schema.fbs not found: delegated XNNPACK ops are not named")
    return ()


def xnnpack_nodes(payload: bytes) -> list[str]:
    """The `XNodeUnion` member of every node of an XNNPACK payload, in order. PteError when
    the payload is not an XNNGraph."""
    if payload[4:8] == _XNN_MAGIC:
        offset, size = struct.unpack_from("<II", payload, 10)
        graph = payload[offset : offset + size]
    else:  # payloads written before the XH00 header: the flatbuffer itself
        graph = payload
    members = xnode_union_members()
    try:
        root = struct.unpack_from("<I", graph, 0)[0]
        table = root
        vtable = table - struct.unpack_from("<i", graph, table)[0]
        if struct.unpack_from("<H", graph, vtable)[0] <= 4 + 2 * 1:
            return []
        field = struct.unpack_from("<H", graph, vtable + 4 + 2 * 1)[0]  # XNNGraph.xnodes
        if not field:
            return []
        start = table + field + struct.unpack_from("<I", graph, table + field)[0]
        count = struct.unpack_from("<I", graph, start)[0]
        names = []
        for index in range(count):
            slot = start + 4 + 4 * index
            node = slot + struct.unpack_from("<I", graph, slot)[0]
            node_vtable = node - struct.unpack_from("<i", graph, node)[0]
            type_field = struct.unpack_from("<H", graph, node_vtable + 4)[0]  # xnode_union_type
            kind = struct.unpack_from("<B", graph, node + type_field)[0] if type_field else 0
            names.append(members[kind] if kind < len(members) else f"XNN#{kind}")
        return names
    except struct.error as exc:
        raise PteError(f"XNNPACK payload is not an XNNGraph: {exc}") from exc


def program_op_names(data: bytes) -> frozenset[str]:
    """Every op name the program executes: its kernels' (`add`, `hardswish`, ...) and, for
    XNNPACK delegates, each node's names (`xnn_op_names`). PteError when it does not parse."""
    names = {operator_base(op) for op in read_program(data).operators}
    for backend, payload in delegate_payloads(data):
        if backend == XNNPACK_BACKEND:
            for member in xnnpack_nodes(payload):
                names.update(xnn_op_names(member))
    return frozenset(names)
