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


def test_localization_probes_of_a_network_board_get_a_safe_folder(tmp_path, monkeypatch) -> None:
    """`hil run --localize` on a network board: each probe's output folder is path-safe too."""
    from types import SimpleNamespace

    from hil.localize import on_board

    folders = []
    board = SimpleNamespace(name="10.0.0.7:5555", workdir="/data/local/tmp/hil",
                            run=lambda artifact, slot, *rest: SimpleNamespace(
                                write_outputs=folders.append),
                            shell=lambda argv: None)

    def fake_localize(case, flow, chipset, run_probe, **kwargs):
        run_probe(object(), "p0003")
        return {"status": "done"}

    monkeypatch.setattr(on_board, "localize_case", fake_localize)
    case = SimpleNamespace(key="s.fp32.x")
    assert on_board.localize_on_board(board, case, "c0000", [], "portable", "E9955", tmp_path,
                                      None) == {"status": "done"}
    (folder,) = folders
    assert folder.name == "p0003-10.0.0.7_5555"
    assert not any(c in str(folder.relative_to(tmp_path)) for c in FORBIDDEN)
