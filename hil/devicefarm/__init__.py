"""`devicefarm-cli` served by hil: upstream ExecuTorch's Samsung tests on the lab's boards.

`cli.py` is the command (one process per call, as upstream calls it), `holder.py` the
long-lived process that holds the session's board through the pool (hil/pool/held.py),
`session.py` the session's folder and the wire between them.
"""
