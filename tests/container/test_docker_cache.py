"""The container tests' kept docker data root (tests/container/conftest.py): keyed by a hash
of what the image's cached layers are made of, so a change of any of them starts the next
session from an empty root (a from-scratch build); one session at a time per root; the
roots of older keys are removed once no session holds them. No engine needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.container import conftest
from tests.container.conftest import DOCKER_CACHE_INPUTS, REPO, docker_cache_key


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A copy of the files the key reads."""
    for name in DOCKER_CACHE_INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_the_key_covers_the_dockerfile_the_pins_the_base_script_and_the_cas(inputs, tmp_path):
    assert set(DOCKER_CACHE_INPUTS) >= {"Dockerfile", "pyproject.toml", "scripts/offline-base-image.sh"}
    key = docker_cache_key(inputs, ca_certs=())
    assert key == docker_cache_key(inputs, ca_certs=()) == docker_cache_key(REPO, ca_certs=())
    for name in DOCKER_CACHE_INPUTS:
        path = inputs / name
        before = path.read_bytes()
        path.write_bytes(before + b"\n# changed\n")
        assert docker_cache_key(inputs, ca_certs=()) != key, name
        path.write_bytes(before)
    pins = inputs / "pyproject.toml"
    pins.write_text(pins.read_text().replace('"adbutils', '"adbutils-other', 1))
    assert docker_cache_key(inputs, ca_certs=()) != key  # a changed pin changes the requirements
    pins.write_text((REPO / "pyproject.toml").read_text())
    cert = tmp_path / "corp.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n")
    with_ca = docker_cache_key(inputs, ca_certs=(cert,))
    assert with_ca != key
    cert.write_text("-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n")
    assert docker_cache_key(inputs, ca_certs=(cert,)) != with_ca


def test_one_session_per_root_and_older_keys_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "DOCKER_CACHE", tmp_path)
    (tmp_path / "oldkey" / "image").mkdir(parents=True)
    (tmp_path / "oldkey.lock").touch()
    root, state, fd = conftest._cached_data_root("newkey")
    assert (root, state) == (tmp_path / "newkey", "cold")
    assert not (tmp_path / "oldkey").exists() and not (tmp_path / "oldkey.lock").exists()
    assert conftest._cached_data_root("newkey") is None  # held by this "session"
    busy = conftest._cached_data_root("otherkey")  # a second session on other inputs...
    assert busy is not None and (tmp_path / "newkey.lock").exists()  # ...leaves a held root alone
    conftest.os.close(busy[2])
    conftest.os.close(fd)
    (root / "image").mkdir(parents=True)
    again = conftest._cached_data_root("newkey")
    assert again is not None and again[1] == "warm"
    conftest.os.close(again[2])
