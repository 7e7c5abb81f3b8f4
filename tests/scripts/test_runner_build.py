"""The runner profiles' build: scripts/hil-runner.cmake with the real cmake, and build-enn.sh's
android steps against a FAKE ExecuTorch checkout, a FAKE NDK and a FAKE cmake (the real
build needs the LITECORE SDK, ExecuTorch's submodules and NDK r28c: none exist here, so the
Android build of either profile has NOT run on this machine)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.runner.profiles import choose_profile
from tests.container import fake_litecore

REPO = Path(__file__).resolve().parents[2]
BUILD_ENN = REPO / "scripts" / "build-enn.sh"
INCLUDE = REPO / "scripts" / "hil-runner.cmake"
INSTALL = REPO / "scripts" / "install-litecore.sh"
TOY_PROJECT = """cmake_minimum_required(VERSION 3.24)
project(executorch C)
function(executorch_target_link_options_shared_lib target)
  target_link_options(${target} INTERFACE "-Wl,--whole-archive-stand-in")
endfunction()
file(WRITE ${CMAKE_BINARY_DIR}/lib.c "int f(void) { return 0; }\\n")
file(WRITE ${CMAKE_BINARY_DIR}/main.c "int main(void) { return 0; }\\n")
foreach(lib enn_backend portable_ops_lib xnnpack_backend quantized_ops_lib)
  add_library(${lib} STATIC ${CMAKE_BINARY_DIR}/lib.c)
endforeach()
# as backends/samsung/CMakeLists.txt does
add_executable(enn_executor_runner ${CMAKE_BINARY_DIR}/main.c)
target_link_libraries(enn_executor_runner PRIVATE enn_backend portable_ops_lib)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/links.txt
     CONTENT "$<TARGET_PROPERTY:enn_executor_runner,LINK_LIBRARIES>\\n")
"""


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_hil_profile_include_adds_xnnpack_and_quantized_to_upstreams_link_line(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(TOY_PROJECT)
    done = subprocess.run(["cmake", "-S", str(source), "-B", str(tmp_path / "build"),
                           f"-DCMAKE_PROJECT_executorch_INCLUDE={INCLUDE}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    links = (tmp_path / "build" / "links.txt").read_text().strip().split(";")
    assert links == ["enn_backend", "portable_ops_lib", "xnnpack_backend", "quantized_ops_lib"]
    assert "also links xnnpack_backend quantized_ops_lib" in done.stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_hil_profile_include_fails_without_the_xnnpack_build(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(TOY_PROJECT.replace("xnnpack_backend ", ""))
    done = subprocess.run(["cmake", "-S", str(source), "-B", str(tmp_path / "build"),
                           f"-DCMAKE_PROJECT_executorch_INCLUDE={INCLUDE}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "target xnnpack_backend is not defined" in done.stderr


FAKE_CMAKE = """#!/bin/sh
# FAKE cmake: records each call; --build produces a fake aarch64 runner.
printf '%s\\n' "$*" >> "$HIL_FAKE_CMAKE_LOG"
if [ "$1" = --build ]; then
  mkdir -p "$2/backends/samsung"
  printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\002\\000\\267\\000hil-fake' \\
    > "$2/backends/samsung/enn_executor_runner"
fi
"""
FAKE_BUILD_SH = """#!/bin/bash
# FAKE backends/samsung/build.sh: records its arguments, produces a fake aarch64 runner.
printf 'build.sh %s\\n' "$*" >> "$HIL_FAKE_CMAKE_LOG"
mkdir -p build_samsung_android/backends/samsung
printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\002\\000\\267\\000upstream' \\
  > build_samsung_android/backends/samsung/enn_executor_runner
"""


@pytest.fixture
def fakes(tmp_path: Path) -> dict[str, Path]:
    """A FAKE LITECORE (layout only), a FAKE NDK (its toolchain file), a FAKE ExecuTorch
    checkout (backends/samsung/build.sh) and a FAKE cmake first on PATH."""
    sdk = tmp_path / "sdk"
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    subprocess.run(["bash", str(INSTALL), "--tarball", str(tarball), "--dest", str(sdk), "--sha256", "unverified"],
                   check=True, capture_output=True)
    ndk = tmp_path / "ndk"
    (ndk / "build" / "cmake").mkdir(parents=True)
    (ndk / "build" / "cmake" / "android.toolchain.cmake").write_text("# FAKE\n")
    work = tmp_path / "executorch"
    (work / "backends" / "samsung").mkdir(parents=True)
    (work / "backends" / "samsung" / "build.sh").write_text(FAKE_BUILD_SH)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text(FAKE_CMAKE)
    (bin_dir / "cmake").chmod(0o755)
    return {"sdk": sdk, "ndk": ndk, "work": work, "bin": bin_dir, "log": tmp_path / "calls.log",
            "out": tmp_path / "out"}


def build_android(fakes: dict[str, Path], *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{fakes['bin']}:{os.environ['PATH']}", HIL_FAKE_CMAKE_LOG=str(fakes["log"]))
    return subprocess.run(
        ["bash", str(BUILD_ENN), "--sdk", str(fakes["sdk"]), "--build", "android", "--ndk", str(fakes["ndk"]),
         "--work", str(fakes["work"]), "--out", str(fakes["out"]), "--python", sys.executable, *extra],
        capture_output=True, text=True, timeout=120, env=env,
    )


build_android_with = build_android


def test_hil_profile_configures_upstreams_options_plus_xnnpack_and_quantized(fakes: dict[str, Path]) -> None:
    done = build_android(fakes)
    assert done.returncode == 0, done.stderr
    configure, build = fakes["log"].read_text().splitlines()
    for option in ("-DEXECUTORCH_BUILD_ENN=ON", "-DANDROID_ABI=arm64-v8a", "-DANDROID_PLATFORM=android-28",
                   "-DCMAKE_BUILD_TYPE=Release", "-DEXECUTORCH_BUILD_XNNPACK=ON",
                   "-DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON", f"-DCMAKE_PROJECT_executorch_INCLUDE={INCLUDE}",
                   f"-DEXYNOS_AI_LITECORE_ROOT={fakes['sdk'].resolve()}"):
        assert option in configure.split(), option
    assert build.startswith("--build build_samsung_android_hil") and build.endswith("--target install")
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    sidecar = json.loads((fakes["out"] / "runner" / "enn_executor_runner.profile.json").read_text())
    assert sidecar["profile"] == "hil"
    assert sidecar["sha256"] == hashlib.sha256(runner.read_bytes()).hexdigest()
    choice = choose_profile(None, None, None, runner)  # what hil run reads beside --runner
    assert (choice.profile.name, choice.source) == ("hil", "sidecar enn_executor_runner.profile.json")


def test_upstream_profile_uses_executorchs_build_sh_as_it_is(fakes: dict[str, Path]) -> None:
    done = build_android(fakes, "--runner-profile", "upstream")
    assert done.returncode == 0, done.stderr
    (call,) = fakes["log"].read_text().splitlines()
    assert call.startswith("build.sh ") and "--build android" in call
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    assert choose_profile(None, None, None, runner).profile.name == "upstream"
    runner.write_bytes(runner.read_bytes() + b"patched")  # another binary: the sidecar no longer holds
    choice = choose_profile(None, None, None, runner)
    assert choice.profile.name == "upstream" and "describes another binary" in choice.source


def test_each_runner_profile_builds_in_a_folder_of_its_own(fakes: dict[str, Path]) -> None:
    # one folder for both let CMake's cache keep XNNPACK linked into a later upstream build
    # whose sidecar said upstream. A FAKE python: the android steps never use it, and importing
    # torch three times would be most of this test's time
    python = fakes["bin"] / "python-fake"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)

    def build_android(fakes: dict[str, Path], *extra: str) -> subprocess.CompletedProcess[str]:
        return build_android_with(fakes, *extra, "--python", str(python))

    assert build_android(fakes).returncode == 0
    configure = fakes["log"].read_text().splitlines()[0].split()
    assert configure[configure.index("-B") + 1] == "build_samsung_android_hil"
    assert f"-DCMAKE_INSTALL_PREFIX={fakes['work']}/build_samsung_android_hil" in configure
    hil_cache = fakes["work"] / "build_samsung_android_hil" / "CMakeCache.txt"
    hil_cache.write_text("EXECUTORCH_BUILD_XNNPACK:BOOL=ON\n")
    assert build_android(fakes, "--runner-profile", "upstream").returncode == 0
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    assert runner.read_bytes().endswith(b"upstream")  # build.sh's folder, not the hil one
    assert hil_cache.exists()  # the hil build is kept for the next hil build
    # a work folder from before: build.sh's folder configured for hil is started afresh
    stale = fakes["work"] / "build_samsung_android" / "CMakeCache.txt"
    stale.write_text("EXECUTORCH_BUILD_XNNPACK:BOOL=ON\n")
    done = build_android(fakes, "--runner-profile", "upstream")
    assert done.returncode == 0 and "configured for the hil profile" in done.stderr
    assert not stale.exists()


def test_unknown_runner_profile_is_one_line_exit_3(fakes: dict[str, Path]) -> None:
    done = build_android(fakes, "--runner-profile", "fast")
    assert done.returncode == 3
    assert done.stderr.strip() == "build-enn: --runner-profile: unknown profile 'fast' (hil or upstream)"


def test_the_x86_wrapper_is_compiled_with_clang_as_upstreams_ci_does(fakes: dict[str, Path]) -> None:
    # upstream builds with -Werror and its CI compiles with clang (ci-image ...-clang12): GCC
    # warnings would stop the image's build
    (fakes["work"] / "backends" / "samsung" / "build.sh").write_text(
        '#!/bin/bash\nprintf "build.sh %s CC=%s CXX=%s\\n" "$*" "${CC:-}" "${CXX:-}" >> "$HIL_FAKE_CMAKE_LOG"\n')
    for name in ("clang", "clang++", "python-fake"):
        (fakes["bin"] / name).write_text("#!/bin/sh\nexit 0\n")
        (fakes["bin"] / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{fakes['bin']}:{os.environ['PATH']}", HIL_FAKE_CMAKE_LOG=str(fakes["log"]))
    env.pop("CC", None)
    env.pop("CXX", None)
    argv = ["bash", str(BUILD_ENN), "--sdk", str(fakes["sdk"]), "--build", "x86_64", "--work", str(fakes["work"]),
            "--out", str(fakes["out"]), "--python", str(fakes["bin"] / "python-fake")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert "produced no backends/samsung/python/Py*.so" in done.stderr  # the FAKE build makes none
    assert fakes["log"].read_text().splitlines()[-1].endswith("--build x86_64 CC=clang CXX=clang++")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**env, "CXX": "g++-12"})
    assert fakes["log"].read_text().splitlines()[-1].endswith("CC= CXX=g++-12")  # a choice made is kept
    dockerfile = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()
    stage = dockerfile.split("AS enn-build", 1)[1].split("\nFROM ", 1)[0]
    assert " clang " in stage.split("apt-get install", 1)[1].split("\n", 1)[0]
