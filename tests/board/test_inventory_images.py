"""Inventory provisioning fields (images, flash_order, expected_build, product, fastboot): records
as written, YAML anchors shared, and one clear line (exit 3) for every mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.board.images import Image
from hil.board.inventory import load_inventory, load_lab_inventory
from hil.cli import main
from hil.errors import UsageError

FINGERPRINT = "samsung/e9955/e9955:15/HIL.1/1:user/release-keys"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "boards.yaml"
    path.write_text(text)
    return path


def test_images_shared_by_an_anchor_become_records_in_flash_order(tmp_path: Path) -> None:
    text = f"""
boards:
  - &first
    name: a
    adb: R3CX40ABCDE
    chipset: E9955
    fastboot: R3CX40ABCDE
    images:
      boot: images/boot.img
      system: {{file: images/system.img, sha256: {"AB" * 32}}}
      vendor: /abs/vendor.img
    flash_order: [vendor, boot]
    expected_build: {{ro.build.fingerprint: "{FINGERPRINT}"}}
    product: s5e9955
  - {{<<: *first, name: b, adb: "10.0.0.7:5555", fastboot: "tcp:10.0.0.7:5554"}}
  - {{name: c, adb: X3, chipset: E9955, expected_build: {{ro.build.id: HIL.1}}}}
  - {{name: d, adb: X4, chipset: E9955}}
"""
    a, b, c, d = load_inventory(_write(tmp_path, text))
    assert a.provisioning is not None and b.provisioning is not None
    images = a.provisioning.images
    assert [i.partition for i in images] == ["vendor", "boot", "system"]  # the order, then the rest
    assert images[0] == Image("vendor", Path("/abs/vendor.img"))
    assert images[1].path == tmp_path.resolve() / "images" / "boot.img"  # beside the inventory
    assert images[2].sha256 == "ab" * 32
    assert a.provisioning.expected_build == ("ro.build.fingerprint", FINGERPRINT)
    assert (a.provisioning.product, a.provisioning.fastboot) == ("s5e9955", "R3CX40ABCDE")
    assert b.provisioning.fastboot == "tcp:10.0.0.7:5554" and b.provisioning.images == images
    assert c.provisioning is not None and not c.provisioning.flashable
    assert c.provisioning.expected_build == ("ro.build.id", "HIL.1")
    assert d.provisioning is None


BASE = "boards:\n  - {name: a, adb: X1, chipset: E9955, "
FULL = ("images: {boot: b.img}, product: p, fastboot: X1, "
        "expected_build: {ro.build.id: B1}")


@pytest.mark.parametrize(("fields", "message"), [
    ("images: [b.img], product: p, fastboot: X1, expected_build: {ro.build.id: B1}",
     r"\(a\): images: expected a mapping PARTITION: FILE"),
    ("images: {'bo ot': b.img}, product: p, fastboot: X1, expected_build: {ro.build.id: B1}",
     r"\(a\): images: 'bo ot' is not a partition name"),
    ("images: {'-w': b.img}, product: p, fastboot: X1, expected_build: {ro.build.id: B1}",
     r"\(a\): images: '-w' is not a partition name"),  # fastboot would wipe userdata
    ("images: {boot: {file: b.img, sha256: xyz}}, product: p, fastboot: X1, "
     "expected_build: {ro.build.id: B1}", r"\(a\): images.boot.sha256: expected 64 hexadecimal"),
    ("images: {boot: {path: b.img}}, product: p, fastboot: X1, expected_build: {ro.build.id: B1}",
     r"\(a\): images.boot: expected FILE or \{file: FILE, sha256: HEX\}"),
    ("images: {boot: b.img}, fastboot: X1, expected_build: {ro.build.id: B1}",
     r"\(a\): product: required with images"),
    ("images: {boot: b.img}, product: p, fastboot: X1",
     r"\(a\): expected_build: required with images"),
    ("images: {boot: b.img}, product: p, expected_build: {ro.build.id: B1}",
     r"\(a\): fastboot: required with images"),
    (FULL.replace("fastboot: X1", "fastboot: 'tcp:host'"),
     r"\(a\): fastboot: 'tcp:host': expected a USB serial or tcp:HOST:PORT"),
    (FULL.replace("fastboot: X1", "fastboot: 'tcp:h:70000'"), r"\(a\): fastboot: .*port out of range"),
    (FULL + ", flash_order: [boot, vendor]", r"\(a\): flash_order: 'vendor' has no image"),
    (FULL + ", flash_order: [boot, boot]", r"\(a\): flash_order: a partition appears twice"),
    (FULL + ", flash_order: boot", r"\(a\): flash_order: expected a list of partitions"),
    (FULL.replace("{ro.build.id: B1}", "ro.build.id=B1"), r"\(a\): expected_build: expected one "),
    (FULL.replace("{ro.build.id: B1}", "{ro.build.id: B1, ro.build.type: user}"),
     r"\(a\): expected_build: expected one \{PROPERTY: VALUE\}"),
    (FULL.replace("{ro.build.id: B1}", "{'ro build': B1}"), r"expected_build: 'ro build' is not a property"),
    (FULL.replace("{ro.build.id: B1}", "{ro.build.id: ''}"), r"expected_build.ro.build.id: expected a non"),
    ("product: p", r"\(a\): product: only with images"),
    ("expected_build: {ro.build.id: B1}, flash_order: [boot]", r"\(a\): flash_order: only with images"),
])
def test_each_bad_provisioning_field_is_named(tmp_path: Path, fields: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        load_inventory(_write(tmp_path, BASE + fields + "}\n"))
    assert str(caught.value).startswith(str(tmp_path / "boards.yaml"))
    assert "\n" not in str(caught.value)


def test_a_labgrid_entry_takes_images_and_leaves_the_endpoint_to_its_place(tmp_path: Path) -> None:
    text = ("boards:\n  - {name: p, labgrid: {place: lab1-a}, images: {boot: b.img}, product: s5e9955,"
            " expected_build: {ro.build.id: B1}}\n")
    _, requests = load_lab_inventory(_write(tmp_path, text))
    provisioning = requests[0].provisioning
    assert provisioning is not None and provisioning.fastboot is None
    assert provisioning.with_endpoint("tcp:10.0.0.2:5554").fastboot == "tcp:10.0.0.2:5554"
    with pytest.raises(UsageError, match=r"\(p\): fastboot: not for a labgrid entry"):
        load_lab_inventory(_write(tmp_path, text.replace("product:", "fastboot: X, product:")))


def test_hil_flash_and_boards_report_a_bad_field_in_one_line_with_exit_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, BASE + FULL.replace("fastboot: X1", "fastboot: 'usb:1-2'") + "}\n")
    for command in (["flash"], ["boards"]):
        assert main([*command, "--inventory", str(path)]) == 3
        assert capsys.readouterr().err.strip().splitlines() == [
            f"hil: error: {path}: boards[0] (a): fastboot: 'usb:1-2': expected a USB serial or "
            "tcp:HOST:PORT (udp:HOST:PORT)"]


def test_hil_flash_refuses_a_missing_image_before_any_board_is_touched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, BASE + FULL + "}\n")
    assert main(["flash", "--inventory", str(path)]) == 3
    assert capsys.readouterr().err.strip() == (f"hil: error: {path}: board a: images.boot: "
                                               f"{tmp_path.resolve() / 'b.img'}: no such file")
