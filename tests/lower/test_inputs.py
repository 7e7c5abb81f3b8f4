"""Inputs as models take them: nested arguments flattened in pytree order as the program
does, and non-contiguous examples written in the layout the runner is given. Each artifact is
run by ExecuTorch's runtime from its raw input files, as a runner reads them."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from hil.cases.case import Case, InputSpec
from hil.lower import LoweringFailed
from hil.lower.artifact import read_raw
from hil.lower.build import build_artifact
from hil.verdict import Verdict
from tests.fixtures.nested_inputs import channels_last_image, index_put_inputs


def _run_from_files(artifact) -> list[np.ndarray]:
    from executorch.runtime import Runtime

    inputs = [torch.from_numpy(read_raw(artifact.input_file(i), meta).copy())
              for i, meta in enumerate(artifact.inputs)]
    method = Runtime.get().load_program(artifact.pte).load_method("forward")
    return [t.numpy() for t in method.execute(inputs)]


def _case(factory, input_fn) -> Case:
    return Case("inputs", "t", factory, (InputSpec((1,)),), input_fn=input_fn)


def test_nested_index_tensors_are_flattened_like_the_program(tmp_path: Path) -> None:
    from executorch.backends.test.suite.operators.test_index_put import IndexPutModel

    artifact = build_artifact(_case(IndexPutModel, index_put_inputs), "portable", "E9955", tmp_path)
    assert [(m.dtype, m.shape) for m in artifact.inputs] == [
        ("float32", (5, 2)), ("int64", (2,)), ("float32", (2, 2))]
    (output,) = _run_from_files(artifact)
    expected = index_put_inputs(0)[0].clone()
    expected[[0, 2]] = torch.tensor([[10.0, 20.0], [30.0, 40.0]])
    np.testing.assert_array_equal(output, expected.numpy())
    np.testing.assert_array_equal(artifact.read_reference(0), expected.numpy())


def test_a_channels_last_example_runs_from_contiguous_bytes(tmp_path: Path) -> None:
    factory = functools.partial(torch.nn.Conv2d, 3, 4, 3)
    artifact = build_artifact(_case(factory, channels_last_image), "xnnpack", "E9955", tmp_path)
    (output,) = _run_from_files(artifact)
    np.testing.assert_allclose(output, artifact.read_reference(0), atol=1e-5)


def test_a_leaf_that_is_not_a_tensor_fails_the_inputs_stage(tmp_path: Path) -> None:
    with pytest.raises(LoweringFailed) as failed:
        build_artifact(_case(torch.nn.ReLU, lambda seed: (torch.ones(2), 3)), "portable", "E9955",
                       tmp_path)
    assert failed.value.verdict is Verdict.FAIL_EXPORT
    assert "got a leaf of type int" in failed.value.message
