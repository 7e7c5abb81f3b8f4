"""`devicefarm-cli -D` from a hostile board (fault `list-escape`: its sync LIST names an entry
`../../escaped.txt` and serves it): the name is refused with one line, nothing is written
outside the destination, and the board's honest files still come down."""

from __future__ import annotations

from pathlib import Path

from hil.virtual.launcher import start_virtual_board
from tests.devicefarm.conftest import cli_env, df, poll_assigned


def test_a_listed_name_leading_out_of_the_destination_is_refused(cli_path: Path, tmp_path: Path) -> None:
    with start_virtual_board(tmp_path / "board", "E9955", "df-hostile", ["--runner-profile", "hil"],
                             wait_warm=True) as board:
        env = cli_env(cli_path, "hostile-job", board.address, tmp_path / "sessions")
        assert df(env, "-Q").returncode == 0
        try:
            poll_assigned(env)
            (tmp_path / "result.bin").write_bytes(b"honest output\n")
            assert df(env, f"-U {tmp_path}/result.bin /data/local/tmp/run/output").returncode == 0
            destination = tmp_path / "a" / "b" / "dst"
            destination.mkdir(parents=True)
            assert df(env, f"-D /data/local/tmp/run/output {destination}").returncode == 0  # sane
            assert (destination / "output" / "result.bin").read_bytes() == b"honest output\n"

            board.control("fault list-escape", applied_within=30)
            pulled = df(env, f"-D /data/local/tmp/run/output {destination}")
            assert pulled.returncode == 1, pulled.stdout + pulled.stderr
            (line,) = pulled.stderr.strip().splitlines()
            assert "the board listed '../../escaped.txt'" in line and "refused" in line
            written = {path.relative_to(tmp_path) for path in tmp_path.rglob("escaped.txt")}
            assert written == set(), written  # nowhere: not two folders up, not inside
        finally:
            df(env, "-d")
