"""What hil knows of ExecuTorch's Samsung `enn_executor_runner`, on real and virtual boards.

- `contract`: the runner's order of work, log lines, timing and exit codes, read from upstream's
  `examples/samsung/executor_runner/enn_executor_runner.cpp`; parsing its log into the stage
  where it stopped (what verdicts are made of).
- `pte`: what a `.pte` asks of a runner (method 0, delegates, operators, outputs), read from the
  program's flatbuffer without importing torch.
- `profiles`: what a runner binary can execute (`upstream`, `hil`), how hil learns it, and
  which lowering flows a board can therefore run.
"""
