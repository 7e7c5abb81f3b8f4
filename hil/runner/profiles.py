"""Runner profiles: what an `enn_executor_runner` binary can execute, and how hil learns it.

A runner executes a program only when every delegate's backend and every kernel outside the
delegates is linked into it; otherwise `load_method` fails and the runner aborts (134).

- `upstream`: `enn_backend` and `portable_ops_lib` (+ the runtime's prim ops), as ExecuTorch
  1.5.1's `backends/samsung/build.sh --build android` builds it (`backends/samsung/
  CMakeLists.txt`);
- `hil`: the same + `xnnpack_backend` + `quantized_ops_lib`, as `scripts/build-enn.sh
  --runner-profile hil` builds it (the image's runner).

So on such an `upstream` runner only flow `enn` runs (A8W8 only when every quantize/dequantize
is inside the ENN delegate) and flow `portable` in fp32; `hil` also runs the host flows
`xnnpack` and `portable` at both precisions: a CPU reference on the board beside the NPU.

Those are the profiles' contents when nothing says otherwise. A runner built by
`scripts/build-enn.sh` carries what its link line linked in its sidecar (`backends`,
`kernel_libraries`): its profile has those contents, whatever its name (newer ExecuTorch links
`quantized_ops_lib` into upstream's own runner, `examples/samsung/CMakeLists.txt`).

How hil learns a board's profile, first match wins: `--runner-profile NAME`; the inventory
entry's `runner_profile`; a virtual board's own (`getprop ro.hil.runner_profile`, set by
`hil virtual-board --runner-profile`); the sidecar `enn_executor_runner.profile.json` that
`scripts/build-enn.sh` writes beside the binary (trusted only when its sha256 matches the
binary); otherwise `upstream` (an unknown runner is assumed to be upstream's). A profile named
by `--runner-profile` or the inventory takes the sidecar's contents when the sidecar describes
the `--runner` binary and names the same profile.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from hil.errors import UsageError
from hil.runner.pte import ProgramInfo

ENN_BACKEND = "EnnBackend"
XNNPACK_BACKEND = "XnnpackBackend"
SIDECAR_SUFFIX = ".profile.json"
"""`enn_executor_runner.profile.json` beside `enn_executor_runner`."""
VIRTUAL_PROFILE_PROPERTY = "ro.hil.runner_profile"
"""The property a virtual board states its runner's profile in."""
DEFAULT_VIRTUAL_PROFILE = "hil"
"""The virtual boards hil starts run the host flows unless told otherwise."""

PRIM_OPS = frozenset({
    "aten::_local_scalar_dense", "aten::sym_numel", "aten::sym_size.int",
    "executorch_prim::add.Scalar", "executorch_prim::ceil.Scalar", "executorch_prim::eq.Scalar",
    "executorch_prim::et_copy_index.tensor", "executorch_prim::et_view.default",
    "executorch_prim::floordiv.Scalar", "executorch_prim::floordiv.int",
    "executorch_prim::ge.Scalar", "executorch_prim::gt.Scalar", "executorch_prim::le.Scalar",
    "executorch_prim::lt.Scalar", "executorch_prim::mod.Scalar", "executorch_prim::mod.int",
    "executorch_prim::mul.Scalar", "executorch_prim::neg.Scalar", "executorch_prim::round.Scalar",
    "executorch_prim::sub.Scalar", "executorch_prim::sym_float.Scalar",
    "executorch_prim::sym_int.Scalar", "executorch_prim::sym_ite.Scalar",
    "executorch_prim::sym_max.Scalar", "executorch_prim::sym_min.Scalar",
    "executorch_prim::sym_not.Scalar", "executorch_prim::truediv.Scalar",
    "executorch_prim::trunc.Scalar",
})
"""Kernels registered by the `executorch` library itself (kernels/prim_ops/register_prim_ops.cpp):
every runner has them."""

KERNEL_LIBRARIES = {
    "portable": "kernels/portable/functions.yaml",
    "quantized": "kernels/quantized/quantized.yaml",
}
"""Kernel library → its operator list in the executorch wheel (what `portable_ops_lib` and
`quantized_ops_lib` register)."""


@dataclass(frozen=True)
class RunnerProfile:
    """What one kind of runner binary links."""

    name: str
    description: str
    """One line for humans."""
    backends: frozenset[str]
    """Delegate backend ids it can load."""
    kernel_libraries: tuple[str, ...]
    """Kernel libraries linked (keys of KERNEL_LIBRARIES)."""

    def operators(self) -> frozenset[str]:
        """Every kernel it registers, `namespace::name.overload`."""
        names = set(PRIM_OPS)
        for library in self.kernel_libraries:
            names |= _library_operators(library)
        return frozenset(names)


PROFILES = {
    "upstream": RunnerProfile(
        "upstream", "ENN + portable kernels (ExecuTorch's backends/samsung/build.sh)",
        frozenset({ENN_BACKEND}), ("portable",),
    ),
    "hil": RunnerProfile(
        "hil", "ENN + XNNPACK + portable and quantized kernels (scripts/build-enn.sh)",
        frozenset({ENN_BACKEND, XNNPACK_BACKEND}), ("portable", "quantized"),
    ),
}
BACKEND_NAMES = {ENN_BACKEND: "ENN", XNNPACK_BACKEND: "XNNPACK"}
"""Delegate backend id → how a profile's description names it."""
VIRTUAL_BACKENDS = frozenset({XNNPACK_BACKEND})
"""Backends a virtual board can execute: no NPU, so ENN programs load on none."""

FLOW_BACKENDS = {"enn": ENN_BACKEND, "xnnpack": XNNPACK_BACKEND, "portable": None}
"""The delegate each lowering flow produces."""


@functools.cache
def _library_operators(library: str) -> frozenset[str]:
    import yaml  # here, not at the top: the action's launcher venv (no deps) imports this module

    spec = importlib.util.find_spec("executorch")  # a namespace package: no __file__
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("executorch is not installed: runner profiles need its kernel lists")
    path = Path(list(spec.submodule_search_locations)[0]) / KERNEL_LIBRARIES[library]
    names = set()
    for entry in yaml.safe_load(path.read_text()) or []:
        if "op" in entry:
            names.add(f"aten::{entry['op']}")
        elif "func" in entry:
            name = entry["func"].split("(", 1)[0]
            names.add(name if "::" in name else f"aten::{name}")
    return frozenset(names)


def profile_named(name: str, where: str = "--runner-profile") -> RunnerProfile:
    """The profile called `name`; UsageError naming `where` otherwise."""
    if name not in PROFILES:
        raise UsageError(f"{where}: unknown runner profile {name!r} (one of {', '.join(PROFILES)})")
    return PROFILES[name]


@dataclass(frozen=True)
class Refusal:
    """Why a runner cannot load a program: what `load_method` reports first."""

    backends: tuple[str, ...] = ()
    """Delegate backends not linked into the runner."""
    unavailable: tuple[str, ...] = ()
    """Backends linked but without their hardware (ENN on a virtual board)."""
    operators: tuple[tuple[int, str], ...] = ()
    """(operator index, name) of kernels not registered, once per KernelCall instruction
    that calls one (as method.cpp reports them)."""

    def __str__(self) -> str:
        if self.backends:
            return f"backend {', '.join(self.backends)} is not linked into the runner"
        if self.unavailable:
            return f"backend {', '.join(self.unavailable)} is not available on this board"
        return "missing operator(s): " + ", ".join(dict.fromkeys(name for _index, name in self.operators))


def refusal(profile: RunnerProfile, program: ProgramInfo, virtual: bool = False) -> Refusal | None:
    """Why `profile`'s runner cannot load method 0 of `program` (None: it can). Delegates
    are initialised before kernels are resolved (runtime/executor/method.cpp), so a missing
    backend is reported alone."""
    missing = tuple(dict.fromkeys(b for b in program.backends if b not in profile.backends))
    if missing:
        return Refusal(backends=missing)
    if virtual:
        unavailable = tuple(dict.fromkeys(b for b in program.backends if b not in VIRTUAL_BACKENDS))
        if unavailable:
            return Refusal(unavailable=unavailable)
    known = profile.operators()
    calls = program.kernel_calls or tuple(range(len(program.operators)))
    operators = tuple((i, program.operators[i]) for i in calls
                      if 0 <= i < len(program.operators) and program.operators[i] not in known)
    return Refusal(operators=operators) if operators else None


def flow_refusal(profile: RunnerProfile, flow: str, precision: str, virtual: bool) -> str | None:
    """Why a board with `profile` cannot run programs of `flow` at `precision` (None: it
    can). A8W8 programs of every flow but `enn` keep quantize/dequantize kernels outside the
    delegate, which only the quantized kernel library has."""
    backend = FLOW_BACKENDS[flow]
    if backend is not None and backend not in profile.backends:
        return f"its runner has no {backend} delegate"
    if virtual and backend is not None and backend not in VIRTUAL_BACKENDS:
        return "a virtual board has no NPU"
    if precision == "a8w8" and flow != "enn" and "quantized" not in profile.kernel_libraries:
        return "its runner has no quantized kernels for A8W8"
    return None


@dataclass(frozen=True)
class ProfileChoice:
    """A board's runner profile and how hil learnt it."""

    profile: RunnerProfile
    source: str
    """`--runner-profile`, `inventory`, `virtual board`, `sidecar <file>`, or `unknown runner`."""

    def record(self) -> dict[str, str]:
        """The `runner_profile` entry of a board in results.json."""
        return {"name": self.profile.name, "source": self.source,
                "description": self.profile.description}


def sidecar_path(runner: Path) -> Path:
    """Where build-enn.sh records a runner's profile."""
    return runner.with_name(runner.name + SIDECAR_SUFFIX)


def as_built(profile: RunnerProfile, sidecar: dict[str, object], source: str) -> RunnerProfile:
    """`profile` with what the runner's build linked, when its sidecar lists it (`backends`,
    `kernel_libraries`, read by build-enn.sh from the runner's link line); as it is otherwise."""
    backends, kernels = sidecar.get("backends"), sidecar.get("kernel_libraries")
    if not isinstance(backends, list) or not isinstance(kernels, list):
        return profile
    linked = frozenset(str(b) for b in backends)
    libraries = tuple(str(k) for k in kernels if k in KERNEL_LIBRARIES)
    if linked == profile.backends and libraries == profile.kernel_libraries:
        return profile
    names = " + ".join(BACKEND_NAMES.get(b, b) for b in sorted(linked, key=lambda b: b != ENN_BACKEND))
    kernel_text = " and ".join(libraries) + " kernels" if libraries else "no kernel library"
    return RunnerProfile(profile.name, f"{names} + {kernel_text} (as built: {source})", linked, libraries)


def sidecar_profile(runner: Path) -> tuple[RunnerProfile | None, str]:
    """The profile the runner's sidecar states (with what the build linked: `as_built`), and a
    note; (None, why) when there is no sidecar or it does not describe this very binary."""
    path = sidecar_path(runner)
    if not path.is_file():
        return None, f"no {path.name}"
    try:
        data = json.loads(path.read_text())
        name, digest = data["profile"], data["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{path.name} unreadable ({type(exc).__name__})"
    actual = hashlib.sha256(runner.read_bytes()).hexdigest()
    if digest != actual:
        return None, f"{path.name} describes another binary (sha256 {str(digest)[:12]}, runner {actual[:12]})"
    if name not in PROFILES:
        return None, f"{path.name} names an unknown profile {name!r}"
    return as_built(PROFILES[name], data, path.name), f"sidecar {path.name}"


def runner_identity(runner: Path) -> dict[str, str | None]:
    """results.json `run.boards[].runner`: the runner file a board runs, by its `file` name and
    `sha256`, with the `commit` it was built from, its `profile` and `built_by` as its sidecar
    states them (None where there is no sidecar, or it describes another binary)."""
    digest = hashlib.sha256(runner.read_bytes()).hexdigest()
    record: dict[str, str | None] = {"file": runner.name, "sha256": digest, "commit": None,
                                     "profile": None, "built_by": None}
    try:
        data = json.loads(sidecar_path(runner).read_text())
    except (OSError, ValueError):
        return record
    if isinstance(data, dict) and data.get("sha256") == digest:
        for key in ("commit", "profile", "built_by"):
            value = data.get(key)
            record[key] = value if isinstance(value, str) and value else None
    return record


def choose_profile(
    declared: str | None,
    inventory: str | None,
    virtual_board: str | None,
    runner: Path | None,
) -> ProfileChoice:
    """A board's profile, first match wins: `--runner-profile`, the inventory entry, the
    virtual board's own, the runner's sidecar, else `upstream`. A named profile has the
    contents the runner was built with when its sidecar names the same profile."""
    built, note = sidecar_profile(runner) if runner is not None else (None, "no --runner")

    def named(name: str, where: str) -> RunnerProfile:
        profile = profile_named(name, where)
        return built if built is not None and built.name == profile.name else profile

    if declared:
        return ProfileChoice(named(declared, "--runner-profile"), "--runner-profile")
    if inventory:
        return ProfileChoice(named(inventory, "inventory: runner_profile"), "inventory")
    if virtual_board:
        if virtual_board in PROFILES:
            return ProfileChoice(PROFILES[virtual_board], "virtual board")
    if built is not None:
        return ProfileChoice(built, note)
    return ProfileChoice(PROFILES["upstream"], f"unknown runner ({note}): treated as upstream")


@dataclass(frozen=True)
class BoardRunner:
    """One board of a run as flow selection sees it."""

    name: str
    choice: ProfileChoice
    virtual: bool

    def describe(self) -> str:
        """`virtual-0 (runner profile upstream: ENN + portable kernels ...; from --runner-profile)`."""
        kind = ", VIRTUAL" if self.virtual else ""
        return (f"{self.name} (runner profile {self.choice.profile.name}: "
                f"{self.choice.profile.description}; from {self.choice.source}{kind})")


HOST_FLOWS = ("xnnpack", "portable")
"""Flows `--flow auto` falls back to without ENN, in order of preference."""
WAYS_OUT = (
    "ways out: flow enn with the LITECORE SDK (see `hil doctor`), or a runner that runs the "
    "host flows (profile hil: scripts/build-enn.sh --runner-profile hil, then --runner-profile hil)"
)


def choose_flow(
    requested: str, boards: list[BoardRunner], precisions: list[str], sdk_problem: str | None
) -> tuple[str, str]:
    """The flow a run lowers with, and why. `requested` is `auto` or a flow; `sdk_problem`
    is why LITECORE cannot lower here (None: it can). UsageError (one line naming the boards,
    their profiles and the ways out) when the flow cannot run on every board."""

    def refusals(flow: str) -> list[str]:
        found = []
        for board in boards:
            for precision in precisions:
                why = flow_refusal(board.choice.profile, flow, precision, board.virtual)
                if why is not None:
                    found.append(f"{board.describe()} cannot run {flow} {precision}: {why}")
                    break
        return found

    if requested != "auto":
        if requested == "enn" and sdk_problem is not None:
            raise UsageError(sdk_problem)
        refused = refusals(requested)
        if refused:
            raise UsageError(f"--flow {requested}: " + "; ".join(refused) + f"; {WAYS_OUT}")
        return requested, f"requested: {requested}"
    enn_refused = refusals("enn")
    if sdk_problem is None and not enn_refused:
        return "enn", "auto: LITECORE SDK usable and every board's runner has ENN"
    why_not_enn = "LITECORE SDK not usable" if sdk_problem is not None else enn_refused[0]
    for flow in HOST_FLOWS:
        if not refusals(flow):
            return flow, f"auto: {why_not_enn} -> {flow}, which every board's runner can execute"
    details = "; ".join(refusals(HOST_FLOWS[-1]))
    raise UsageError(f"--flow auto: no flow runs on every board: {why_not_enn}; {details}; {WAYS_OUT}")
