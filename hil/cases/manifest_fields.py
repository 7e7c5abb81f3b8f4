"""The fields of a manifest (hil/cases/manifest.py validates them, docs/reference/manifest.md is
generated from them): one documented table per mapping."""

from __future__ import annotations

from hil.expectation import EXPECT_FIELDS  # noqa: F401 - the manifest's `expect:`, read by the reference
from hil.fields import Field

TOP_FIELDS = (
    Field("suite", "string", "the suite's name: the first part of each case's key "
          "`suite.precision.id`", default="the file's name without .yaml"),
    Field("cases", "list of cases", "the cases (below); at least one", required=True),
    Field("latency", "mapping", "the latency plan of this suite's cases, over `--latency` "
          "(below)"),
)
CASE_FIELDS = (
    Field("id", "string", "the case's name, unique in the suite: printable, at most 200 "
          "characters", required=True),
    Field("module", "`package.module:callable`", "a callable returning the `torch.nn.Module` to "
          "test, imported with the manifest's folder first on `sys.path`", required=True),
    Field("kwargs", "mapping", "keyword arguments for the `module` callable", default="{}"),
    Field("inputs", "list of inputs, or `package.module:fn`", "one entry per `forward()` input "
          "(below); or a function called with the case's seed, returning a tensor or a tuple of "
          "tensors. May be left out with a `dataset` (its batch is the input)", required=True),
    Field("precision", "`fp32`, `a8w8`, `all` or a list", "the precisions the case runs at "
          "(`all`: fp32 and a8w8)", default="fp32"),
    Field("tolerance", "mapping", "how close the board's outputs must be (below); one tolerance "
          "for every precision", default="fp32: atol and rtol 1e-4; A8W8: the ops suite's rule "
          "(1e-3 + 2 quantization steps, SQNR >= 30 dB)"),
    Field("expect_delegated", "list of strings", "ops expected inside the ENN delegate (flow "
          "enn); one that falls back to the CPU makes the case PASS_UNDELEGATED", default="[]"),
    Field("require_delegation", "boolean", "on flow enn, an expected op left outside the "
          "delegate fails the case instead of a warning", default="false"),
    Field("tags", "list of strings", "labels `--tag` selects by", default="[]"),
    Field("seed", "integer", "seed of the inputs and of the module's random initialisation",
          default="0"),
    Field("dataset", "mapping with `kind`", "real inputs for a checker: a dataset kind and its "
          "parameters (below); `root` is relative to the manifest"),
    Field("checker", "name, or mapping with `name`", "a task-level decision check on top of the "
          "numeric comparison (below)"),
    Field("calibration", "`package.module:fn`", "A8W8: a function returning a list of input "
          "tuples to calibrate the quantizer with", default="random inputs from `inputs`"),
    Field("expect", "mapping", "a known failure (below): the case still runs; ending with that "
          "verdict is XFAIL, passing is XPASS"),
    Field("skip", "string", "one line saying why: the case is neither lowered nor run (SKIP)"),
)
INPUT_FIELDS = (
    Field("shape", "list of positive integers", "the tensor's shape", required=True),
    Field("dtype", "string", "float32, float16, int64, int32, int8, uint8 or bool",
          default="float32"),
    Field("range", "[low, high]", "uniform random values in this range (low < high)",
          default="[-1.0, 1.0]"),
)
TOLERANCE_FIELDS = (
    Field("atol", "number >= 0", "absolute tolerance: |out - ref| <= atol + rtol * |ref| "
          "everywhere", default="1e-4"),
    Field("rtol", "number >= 0", "relative tolerance", default="1e-4"),
    Field("min_sqnr_db", "number >= 0", "also require this SQNR (dB) of every output",
          default="none"),
    Field("scale_steps", "number >= 0", "A8W8: add this many steps of the output's "
          "quantization scale to atol", default="0"),
)
LATENCY_FIELDS = (
    Field("warmup", "integer >= 0", "untimed runs before each invocation's timed ones",
          default="from --latency"),
    Field("iterations", "integer >= 1", "runner invocations per case, one latency sample each",
          default="from --latency"),
    Field("cooldown_c", "number >= 0", "wait before each case until the board's hottest zone is "
          "below this temperature (°C)", default="from --latency"),
    Field("cooldown_max_s", "integer >= 0", "wait at most this long for the cool-down",
          default="from --latency"),
    Field("cv_limit", "number >= 0", "a coefficient of variation of the samples above this "
          "marks the latency unstable", default="from --latency"),
)
