"""The lowering pool's workers start warm (hil/lower/pool.py `warm_up`): what the exporter builds
at a process's first lowering is built once in their host, and the host leaves them no OpenMP
thread team without its threads (libgomp after fork: their first convolution waited forever)."""

from __future__ import annotations

import functools
import time

import pytest

from hil.forked_workers import Workers
from hil.lower.pool import WORKER_IMPORTS, warm_up

pytestmark = pytest.mark.slow


def warm_state(index: int) -> tuple[int, int, float]:
    """In a worker: XNNPACK's cached upsample pattern graphs (built at the first lowering), the
    threads torch will use, and a convolution's result (OpenMP's parallel loop)."""
    import torch
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d

    built = bilinear_2d._get_bilinear_2d_graphs.cache_info().currsize  # noqa: SLF001
    conv = torch.nn.Conv2d(8, 8, 3)
    with torch.no_grad():
        conv.weight.fill_(1.0)
        conv.bias.fill_(0.0)
        value = float(conv(torch.ones(1, 8, 64, 64)).sum())
    return built, torch.get_num_threads(), value


def test_xnnpack_workers_start_with_the_hosts_pattern_graphs_and_can_run_a_convolution():
    import torch

    workers = Workers(warm_state, 2, 2, WORKER_IMPORTS, functools.partial(warm_up, "xnnpack", "E9955"))
    for index in range(2):
        workers.submit(index, (index,))
    workers.close()
    outcomes: dict[int, object] = {}
    deadline = time.monotonic() + 180
    try:
        while workers.waiting and time.monotonic() < deadline:
            outcomes.update(workers.outcomes(0.2))
    finally:
        workers.end()
    assert sorted(outcomes) == [0, 1], "a worker's convolution never finished (OpenMP after fork?)"
    for built, threads, value in outcomes.values():
        assert built == 1  # built in the host, not by the worker
        assert threads == torch.get_num_threads()  # the warm-up's one thread was given back
        assert value == 8 * 62 * 62 * (8 * 3 * 3)  # every output sums 8 x 3 x 3 ones
