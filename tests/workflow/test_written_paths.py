"""Every file a run with a network board writes can be uploaded by `actions/upload-artifact`:
no `" : < > | * ?` in any path (the board's name is `HOST:PORT`). The run is `network_run`
(conftest.py), shared with the board tests."""

from __future__ import annotations

from pathlib import Path

from hil.paths import FORBIDDEN, safe_name


def test_safe_name_replaces_every_forbidden_character() -> None:
    assert safe_name("127.0.0.1:5555") == "127.0.0.1_5555"
    assert safe_name('a"b<c>d|e*f?g\\h/i\nj') == "a_b_c_d_e_f_g_h_i_j"
    assert safe_name("..") == "__" and safe_name("") == "_"


def test_no_written_path_holds_a_character_upload_artifact_refuses(network_run: Path,
                                                                   virtual_board) -> None:
    assert ":" in virtual_board.address
    written = [p.relative_to(network_run).as_posix() for p in network_run.rglob("*")]
    assert any("output-" in p for p in written)  # the board's own folders are among them
    bad = [p for p in written if any(c in p for c in FORBIDDEN)]
    assert bad == []
