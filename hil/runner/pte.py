"""What a `.pte` asks of a runner, read from the program's flatbuffer without importing torch.

Field numbers follow ExecuTorch's `schema/program.fbs` (shipped in the executorch wheel):
`Program` {execution_plan 1, constant_buffer 2, backend_delegate_data 3, segments 4,
constant_segment 5, named_data 7}; `Buffer` and `BackendDelegateInlineData` {storage / data
0}; `DataSegment` {offset 0, size 1}; `SubsegmentOffsets` {segment_index 0};
`NamedData` {segment_index 1}; `BackendDelegate` {processed 1} →
`BackendDelegateDataReference` {location 0 (INLINE 0, SEGMENT 1), index 1};
`Program.execution_plan` (1) → `ExecutionPlan` {name 0, values 2, inputs 3, outputs 4, chains 5,
operators 6, delegates 7, non_const_buffer_sizes 8}; `EValue` {val_type 0, val 1} over the
`KernelTypes` union; `Operator` {name 0, overload 1}; `BackendDelegate` {id 0}; `Chain`
{instructions 2}; `Instruction` {instr_args_type 0, instr_args 1}; `KernelCall` and
`DelegateCall` {index 0, args 1}; `Tensor` {sizes 2}. The real runner uses method 0, whatever
its name (`program->get_method_name(0)`).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.runner.contract import METHOD_ALLOCATOR_BYTES

KERNEL_TYPES = (
    "None", "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList", "DoubleList",
    "BoolList", "TensorList", "OptionalTensorList",
)
"""`union KernelTypes` of program.fbs, in order (0 is the union's NONE)."""
_KERNEL_CALL, _DELEGATE_CALL = 1, 2
"""`union InstructionArguments`: NONE, KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall."""

# Sizes of what `Method::init` takes from the method allocator (runtime/executor/method.cpp,
# tensor_parser_portable.cpp), 64-bit: an EValue, a TensorImpl with its Tensor, one stride,
# an instruction's argument span and kernel pointer, one EValue* argument, a BackendDelegate.
_EVALUE, _TENSOR_IMPL, _STRIDE, _INSTRUCTION, _ARGUMENT, _DELEGATE = 16, 72, 4, 24, 8, 48


class PteError(ValueError):
    """The file is not an ExecuTorch program this reader understands."""


class _Reader:
    """Minimal flatbuffer table access: tables, vectors, strings, scalars."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def _u32(self, pos: int) -> int:
        if pos < 0 or pos + 4 > len(self.data):
            raise PteError(f"offset {pos} outside the file")
        return struct.unpack_from("<I", self.data, pos)[0]

    def root(self) -> int:
        return self._u32(0)

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field `index` of the table at `table`, None when absent."""
        vtable = table - struct.unpack_from("<i", self.data, table)[0]
        vtable_size = struct.unpack_from("<H", self.data, vtable)[0]
        slot = 4 + 2 * index
        if slot >= vtable_size:
            return None
        offset = struct.unpack_from("<H", self.data, vtable + slot)[0]
        return table + offset if offset else None

    def table(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return pos + self._u32(pos) if pos is not None else None

    def vector(self, table: int, index: int) -> tuple[int, int]:
        """(position of the first element, length); (0, 0) when absent."""
        pos = self.field(table, index)
        if pos is None:
            return 0, 0
        start = pos + self._u32(pos)
        return start + 4, self._u32(start)

    def tables(self, table: int, index: int) -> list[int]:
        start, length = self.vector(table, index)
        return [start + 4 * i + self._u32(start + 4 * i) for i in range(length)]

    def ints(self, table: int, index: int, fmt: str = "<i") -> list[int]:
        start, length = self.vector(table, index)
        size = struct.calcsize(fmt)
        return [struct.unpack_from(fmt, self.data, start + size * i)[0] for i in range(length)]

    def string(self, table: int, index: int) -> str:
        start, length = self.vector(table, index)
        return self.data[start : start + length].decode("utf-8", errors="replace")

    def scalar(self, table: int, index: int, fmt: str, default: int = 0) -> int:
        pos = self.field(table, index)
        return struct.unpack_from(fmt, self.data, pos)[0] if pos is not None else default


@dataclass(frozen=True)
class ProgramInfo:
    """Method 0 of a program, as a runner sees it."""

    method: str
    """Method 0's name (what the runner executes)."""
    methods: tuple[str, ...]
    """Every method, in the program's order."""
    backends: tuple[str, ...]
    """Backend ids of method 0's delegates (`XnnpackBackend`, `EnnBackend`...), in order."""
    operators: tuple[str, ...]
    """Kernels method 0 calls outside delegates, `namespace::name.overload`."""
    input_kinds: tuple[str, ...]
    """KernelTypes of the method's inputs (`Tensor`, `Int`...)."""
    output_kinds: tuple[str, ...]
    """KernelTypes of the method's outputs."""
    planned_buffers: tuple[int, ...]
    """Sizes of the memory-planned buffers the runner mallocs (buffer 0 is reserved)."""
    method_allocator_min_bytes: int
    """A lower bound of what `load_method` takes from the runner's 4 MB method allocator:
    the runtime's own tables only (delegates' `init` allocations come on top)."""
    constant_bytes: int = 0
    """Constant data outside the delegates: the inline constant buffers, the constant
    segment and the named data segments (weights a backend looks up by key)."""
    delegate_bytes: int = 0
    """Method 0's delegate payloads (inline or in segments): what each backend's `init`
    receives, weights included for XNNPACK and ENN."""
    kernel_calls: tuple[int, ...] = ()
    """The operator index of every KernelCall instruction, in chain order: `load_method`
    resolves (and reports a missing kernel) once per instruction (method.cpp)."""

    @property
    def planned_bytes(self) -> int:
        """The memory-planned buffers the runner allocates for activations and I/O."""
        return sum(self.planned_buffers)

    def memory(self) -> dict[str, Any]:
        """The program's planned memory, as a case's `memory` record gives it: the
        memory-planned buffers, constants, delegate payloads and their sum."""
        return {
            "planned_bytes": self.planned_bytes,
            "constant_bytes": self.constant_bytes,
            "delegate_bytes": self.delegate_bytes,
            "program_bytes": self.planned_bytes + self.constant_bytes + self.delegate_bytes,
            "planned_buffers": list(self.planned_buffers),
        }

    def runner_limits(self) -> list[str]:
        """Why `enn_executor_runner` cannot run this method, one reason per line; empty
        when nothing in the program forbids it."""
        problems = []
        for index, kind in enumerate(self.output_kinds):
            if kind != "Tensor":
                problems.append(
                    f"output {index} is of type {kind}, not a tensor: the runner calls toTensor() on "
                    "every output (enn_executor_runner.cpp) and aborts"
                )
        for index, kind in enumerate(self.input_kinds):
            if kind != "Tensor":
                problems.append(
                    f"input {index} is of type {kind}, not a tensor: the runner feeds only raw tensor files"
                )
        if self.method_allocator_min_bytes > METHOD_ALLOCATOR_BYTES:
            problems.append(
                f"method {self.method!r} needs at least {self.method_allocator_min_bytes / 2**20:.1f} "
                f"MiB of the runner's {METHOD_ALLOCATOR_BYTES // 2**20} MiB method allocator pool: "
                "load_method would fail"
            )
        return problems


def read_program(data: bytes) -> ProgramInfo:
    """Read method 0 of the `.pte` bytes `data`; PteError when it is not a program."""
    if len(data) < 8 or data[4:8] != b"ET12":
        raise PteError("not an ExecuTorch program (no ET12 file identifier)")
    try:
        return _read(_Reader(data))
    except struct.error as exc:
        raise PteError(f"truncated or corrupt program: {exc}") from exc


def read_program_file(path: Path) -> ProgramInfo:
    """`read_program` of a file; a file read before and not changed since (same inode, size
    and modification time) is not read again (every case of a program asks for it)."""
    st = path.stat()
    return _read_file(str(path), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _read_file(path: str, _inode: int, _size: int, _mtime_ns: int) -> ProgramInfo:
    return read_program(Path(path).read_bytes())


def _read(reader: _Reader) -> ProgramInfo:
    program = reader.root()
    plans = reader.tables(program, 1)
    if not plans:
        raise PteError("the program has no methods")
    plan = plans[0]
    values = reader.tables(plan, 2)
    kinds = [KERNEL_TYPES[reader.scalar(v, 0, "<B")] if reader.scalar(v, 0, "<B") < len(KERNEL_TYPES)
             else "unknown" for v in values]

    def kind(index: int) -> str:
        return kinds[index] if 0 <= index < len(kinds) else "missing"

    operators = []
    for operator in reader.tables(plan, 6):
        name, overload = reader.string(operator, 0), reader.string(operator, 1)
        operators.append(f"{name}.{overload}" if overload else name)
    backends = tuple(reader.string(delegate, 0) for delegate in reader.tables(plan, 7))
    tensors = dims = instructions = arguments = 0
    kernel_calls = []
    for value, value_kind in zip(values, kinds, strict=True):
        if value_kind == "Tensor":
            tensor = reader.table(value, 1)
            tensors += 1
            dims += len(reader.ints(tensor, 2)) if tensor is not None else 0
    for chain in reader.tables(plan, 5):
        for instruction in reader.tables(chain, 2):
            instructions += 1
            if reader.scalar(instruction, 0, "<B") in (_KERNEL_CALL, _DELEGATE_CALL):
                call = reader.table(instruction, 1)
                arguments += len(reader.ints(call, 1)) if call is not None else 0
                if reader.scalar(instruction, 0, "<B") == _KERNEL_CALL and call is not None:
                    kernel_calls.append(reader.scalar(call, 0, "<i"))
    constant_bytes, delegate_bytes = _data_sizes(reader, program, plan)
    minimum = (_EVALUE * len(values) + _TENSOR_IMPL * tensors + _STRIDE * dims
               + _INSTRUCTION * instructions + _ARGUMENT * arguments + _DELEGATE * len(backends))
    return ProgramInfo(
        method=reader.string(plan, 0),
        methods=tuple(reader.string(p, 0) for p in plans),
        backends=backends,
        operators=tuple(operators),
        input_kinds=tuple(kind(i) for i in reader.ints(plan, 3)),
        output_kinds=tuple(kind(i) for i in reader.ints(plan, 4)),
        planned_buffers=tuple(reader.ints(plan, 8, "<q")[1:]),
        method_allocator_min_bytes=minimum,
        constant_bytes=constant_bytes,
        delegate_bytes=delegate_bytes,
        kernel_calls=tuple(kernel_calls),
    )


_INLINE, _SEGMENT = 0, 1
"""`enum DataLocation` of program.fbs."""
_EXTENDED_HEADER = b"eh00"
"""Magic of the extended header after the file identifier (`exir/_serialize/_program.py`
`_ExtendedHeader`: magic, length u32, program size u64, segment base offset u64)."""


def delegate_payloads(data: bytes) -> list[tuple[str, bytes]]:
    """Method 0's delegates as (backend id, processed payload bytes), in order; the payload is
    what the backend's `init` receives (`Program.backend_delegate_data` inline, or a segment
    after the flatbuffer: `Program.segments`, offsets from the extended header's segment
    base). PteError when the file is not a program or a payload lies outside it."""
    if len(data) < 8 or data[4:8] != b"ET12":
        raise PteError("not an ExecuTorch program (no ET12 file identifier)")
    reader = _Reader(data)
    try:
        program = reader.root()
        plans = reader.tables(program, 1)
        if not plans:
            raise PteError("the program has no methods")
        inline = reader.tables(program, 3)
        segments = reader.tables(program, 4)
        base = struct.unpack_from("<Q", data, 24)[0] if data[8:12] == _EXTENDED_HEADER else 0
        payloads = []
        for delegate in reader.tables(plans[0], 7):
            backend = reader.string(delegate, 0)
            reference = reader.table(delegate, 1)
            location = reader.scalar(reference, 0, "<b") if reference is not None else _INLINE
            index = reader.scalar(reference, 1, "<I") if reference is not None else 0
            if location == _SEGMENT and index < len(segments):
                offset = base + reader.scalar(segments[index], 0, "<Q")
                size = reader.scalar(segments[index], 1, "<Q")
                if offset + size > len(data):
                    raise PteError(f"delegate {backend}: segment {index} lies outside the file")
                payloads.append((backend, data[offset : offset + size]))
            elif location == _INLINE and index < len(inline):
                start, length = reader.vector(inline[index], 0)
                payloads.append((backend, data[start : start + length]))
            else:
                raise PteError(f"delegate {backend}: no data at {location}/{index}")
        return payloads
    except struct.error as exc:
        raise PteError(f"truncated or corrupt program: {exc}") from exc


def _data_sizes(reader: _Reader, program: int, plan: int) -> tuple[int, int]:
    """(constant bytes, method 0's delegate bytes): see ProgramInfo."""
    segments = [reader.scalar(segment, 1, "<Q") for segment in reader.tables(program, 4)]

    def segment(index: int) -> int:
        return segments[index] if 0 <= index < len(segments) else 0

    constant = sum(reader.vector(buffer, 0)[1] for buffer in reader.tables(program, 2))
    subsegments = reader.table(program, 5)
    if subsegments is not None and reader.vector(subsegments, 1)[1]:
        constant += segment(reader.scalar(subsegments, 0, "<I"))
    named = {reader.scalar(entry, 1, "<I") for entry in reader.tables(program, 7)}
    constant += sum(segment(index) for index in named)
    inline = [reader.vector(blob, 0)[1] for blob in reader.tables(program, 3)]
    delegates = 0
    for delegate in reader.tables(plan, 7):
        processed = reader.table(delegate, 1)
        if processed is None:
            continue
        location, index = reader.scalar(processed, 0, "<b"), reader.scalar(processed, 1, "<I")
        if location == 0:
            delegates += inline[index] if 0 <= index < len(inline) else 0
        else:
            delegates += segment(index)
    return constant, delegates
