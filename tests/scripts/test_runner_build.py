"""The runner profiles' build: scripts/hil-runner.cmake with the real cmake, and build-enn.sh's
android steps against a FAKE ExecuTorch checkout, a FAKE NDK and a FAKE cmake (the real
build needs the LITECORE SDK, ExecuTorch's submodules and NDK r28c: none exist on the test
hosts, so the Android build of either profile has NOT run in these tests)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.runner.profiles import choose_profile, flow_refusal
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


# in CI (scripts/setup installs cmake) a missing cmake fails these tests instead
NEEDS_CMAKE = pytest.mark.skipif(shutil.which("cmake") is None and not os.environ.get("CI"),
                                 reason="cmake is not installed (scripts/setup installs it)")


@NEEDS_CMAKE
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


@NEEDS_CMAKE
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
# FAKE cmake: records each call. A configure notes its options in the build folder; --build
# then produces a fake aarch64 runner where the project that defines it puts it (ExecuTorch's
# own in a 1.5.1 checkout: backends/samsung/; the runner's project in examples/samsung of a
# newer one: that project's build folder), with a link.txt naming what a real build links.
printf '%s\\n' "$*" >> "$HIL_FAKE_CMAKE_LOG"
if [ "$1" != --build ]; then
  while [ $# -gt 0 ]; do [ "$1" = -B ] && build=$2; shift; done
  mkdir -p "$build"
  tail -n 1 "$HIL_FAKE_CMAKE_LOG" > "$build/.fake-configure"
  exit 0
fi
config=$(cat "$2/.fake-configure")
case "$config" in
  *"-S examples/samsung"*) dir=$2 ;;
  *) [ -f examples/samsung/CMakeLists.txt ] && exit 0  # a newer ExecuTorch: no runner here
     dir=$2/backends/samsung ;;
esac
libs="libenn_backend.a libportable_ops_lib.a"
case "$config" in
  *CMAKE_PROJECT_INCLUDE=*|*CMAKE_PROJECT_executorch_INCLUDE=*)
    libs="$libs libxnnpack_backend.a libquantized_ops_lib.a" ;;
esac
mkdir -p "$dir/CMakeFiles/enn_executor_runner.dir"
printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\002\\000\\267\\000hil-fake' \\
  > "$dir/enn_executor_runner"
echo "clang++ -o enn_executor_runner $libs" > "$dir/CMakeFiles/enn_executor_runner.dir/link.txt"
"""
FAKE_BUILD_SH = """#!/bin/bash
# FAKE backends/samsung/build.sh: records its arguments; ExecuTorch 1.5.1's produces the runner
# (with upstream's link line), a newer one only the install the runner's project builds against.
printf 'build.sh %s\\n' "$*" >> "$HIL_FAKE_CMAKE_LOG"
mkdir -p build_samsung_android/lib
[ -f examples/samsung/CMakeLists.txt ] && exit 0
mkdir -p build_samsung_android/backends/samsung/CMakeFiles/enn_executor_runner.dir
printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\002\\000\\267\\000upstream' \\
  > build_samsung_android/backends/samsung/enn_executor_runner
echo "clang++ -o enn_executor_runner libenn_backend.a libportable_ops_lib.a" \\
  > build_samsung_android/backends/samsung/CMakeFiles/enn_executor_runner.dir/link.txt
"""
FAKE_EXAMPLES_BUILD_SH = """#!/bin/bash
# FAKE examples/samsung/build.sh (newer ExecuTorch): the runner's own project, built against
# build_samsung_android; it links the quantized kernels when its CMakeLists.txt says so.
printf 'examples/samsung/build.sh NDK=%s\\n' "$ANDROID_NDK_ROOT" >> "$HIL_FAKE_CMAKE_LOG"
dir=build_samsung_android/examples/samsung
mkdir -p "$dir/CMakeFiles/enn_executor_runner.dir"
printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\002\\000\\267\\000examples' \\
  > "$dir/enn_executor_runner"
libs="libenn_backend.a libportable_ops_lib.a"
grep -q quantized_ops_lib examples/samsung/CMakeLists.txt && libs="$libs libquantized_ops_lib.a"
echo "clang++ -o enn_executor_runner $libs" > "$dir/CMakeFiles/enn_executor_runner.dir/link.txt"
"""
EXAMPLES_CMAKELISTS = """cmake_minimum_required(VERSION 3.15)
project(samsung_example)
find_package(executorch CONFIG REQUIRED)
add_executable(enn_executor_runner executor_runner/enn_executor_runner.cpp)
target_link_libraries(enn_executor_runner PRIVATE enn_logging enn_backend gflags executorch
                      extension_data_loader portable_ops_lib quantized_ops_lib)
"""
"""The runner's own project in a newer ExecuTorch (its examples/samsung/CMakeLists.txt, in the
shape upstream's unit test expects: it links quantized_ops_lib)."""


def examples_layout(work: Path) -> None:
    """Turn the FAKE checkout into a newer ExecuTorch's: the runner built by
    examples/samsung/CMakeLists.txt and examples/samsung/build.sh."""
    (work / "examples" / "samsung").mkdir(parents=True)
    (work / "examples" / "samsung" / "CMakeLists.txt").write_text(EXAMPLES_CMAKELISTS)
    (work / "examples" / "samsung" / "build.sh").write_text(FAKE_EXAMPLES_BUILD_SH)


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


def test_a_newer_checkout_builds_the_runners_own_project_with_the_hil_hook(fakes: dict[str, Path]) -> None:
    """examples/samsung/CMakeLists.txt defines the runner: ExecuTorch's build is configured
    without the hook (it defines no runner any more) and installed, then the runner's project
    is configured against that install with the hook, as examples/samsung/build.sh does."""
    examples_layout(fakes["work"])
    done = build_android(fakes)
    assert done.returncode == 0, done.stderr
    assert "examples layout" in done.stderr
    main, main_build, example, example_build = (line.split() for line in fakes["log"].read_text().splitlines())
    assert not any(option.startswith("-DCMAKE_PROJECT_executorch_INCLUDE") for option in main)
    assert "-DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON" in main and "-DEXECUTORCH_BUILD_XNNPACK=ON" in main
    assert main_build[:2] == ["--build", "build_samsung_android_hil"] and main_build[-1] == "install"
    assert example[example.index("-S") + 1] == "examples/samsung"
    assert example[example.index("-B") + 1] == "build_samsung_android_hil/examples/samsung"
    assert f"-DCMAKE_PROJECT_INCLUDE={INCLUDE}" in example
    prefix = next(option for option in example if option.startswith("-DCMAKE_PREFIX_PATH="))
    assert f"{fakes['work']}/build_samsung_android_hil/lib/cmake/ExecuTorch" in prefix.split("=", 1)[1].split(";")
    assert "-DANDROID_ABI=arm64-v8a" in example and "-DANDROID_PLATFORM=android-28" in example
    assert example_build[:2] == ["--build", "build_samsung_android_hil/examples/samsung"]
    sidecar = json.loads((fakes["out"] / "runner" / "enn_executor_runner.profile.json").read_text())
    assert sidecar["profile"] == "hil"
    assert sidecar["backends"] == ["EnnBackend", "XnnpackBackend"]
    assert sidecar["kernel_libraries"] == ["portable", "quantized"]


def test_a_newer_checkouts_upstream_runner_is_built_by_upstreams_scripts_and_follows_its_link_line(
    fakes: dict[str, Path],
) -> None:
    """Upstream's runner of a newer ExecuTorch links the quantized kernels (its unit test asks for
    it): the sidecar says so, and A8W8 host-flow work is no longer refused on it."""
    examples_layout(fakes["work"])
    done = build_android(fakes, "--runner-profile", "upstream")
    assert done.returncode == 0, done.stderr
    calls = fakes["log"].read_text().splitlines()
    assert calls[0].startswith("build.sh ") and "--build android" in calls[0]
    assert calls[1] == f"examples/samsung/build.sh NDK={fakes['ndk']}"
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    assert runner.read_bytes().endswith(b"examples")  # build_samsung_android/examples/samsung's
    sidecar = json.loads((fakes["out"] / "runner" / "enn_executor_runner.profile.json").read_text())
    assert (sidecar["profile"], sidecar["kernel_libraries"]) == ("upstream", ["portable", "quantized"])
    for declared in (None, "upstream"):  # found by the sidecar, or named: the same contents
        profile = choose_profile(declared, None, None, runner).profile
        assert profile.name == "upstream" and profile.kernel_libraries == ("portable", "quantized")
        assert flow_refusal(profile, "portable", "a8w8", virtual=False) is None
        assert "quantized" in profile.description


def test_a_1_5_1_upstream_runner_carries_enn_and_portable_only(fakes: dict[str, Path]) -> None:
    done = build_android(fakes, "--runner-profile", "upstream")
    assert done.returncode == 0, done.stderr
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    sidecar = json.loads((fakes["out"] / "runner" / "enn_executor_runner.profile.json").read_text())
    assert (sidecar["backends"], sidecar["kernel_libraries"]) == (["EnnBackend"], ["portable"])
    profile = choose_profile(None, None, None, runner).profile
    assert flow_refusal(profile, "portable", "a8w8", virtual=False) == "its runner has no quantized kernels for A8W8"


EXAMPLES_TOY = """cmake_minimum_required(VERSION 3.24)
project(samsung_example C)
file(WRITE ${CMAKE_BINARY_DIR}/lib.c "int f(void) { return 0; }\\n")
file(WRITE ${CMAKE_BINARY_DIR}/main.c "int main(void) { return 0; }\\n")
# the install's exported targets, as find_package(executorch) defines them
foreach(lib enn_backend portable_ops_lib xnnpack_backend quantized_ops_lib)
  add_library(${lib} STATIC ${CMAKE_BINARY_DIR}/lib.c)
endforeach()
# as examples/samsung/CMakeLists.txt does
add_executable(enn_executor_runner ${CMAKE_BINARY_DIR}/main.c)
target_link_libraries(enn_executor_runner PRIVATE enn_backend portable_ops_lib)
"""


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("make") is None, reason="cmake and make needed")
def test_the_hook_links_the_runners_own_project_and_its_link_txt_says_so(tmp_path: Path) -> None:
    """The examples layout's project (its own name, its own top level) gets the hook through
    CMAKE_PROJECT_INCLUDE; the link line a real build writes (link.txt, what build-enn.sh reads
    into the sidecar) names both libraries."""
    source = tmp_path / "examples" / "samsung"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(EXAMPLES_TOY)
    build = tmp_path / "build"
    done = subprocess.run(["cmake", "-G", "Unix Makefiles", "-S", str(source), "-B", str(build),
                           f"-DCMAKE_PROJECT_INCLUDE={INCLUDE}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "also links xnnpack_backend quantized_ops_lib" in done.stdout
    built = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    link = (build / "CMakeFiles" / "enn_executor_runner.dir" / "link.txt").read_text()
    for library in ("libenn_backend.a", "libportable_ops_lib.a", "libxnnpack_backend.a", "libquantized_ops_lib.a"):
        assert library in link


def test_the_sidecar_records_the_commit_the_runner_was_built_from(fakes: dict[str, Path]) -> None:
    """`hil bisect` bisects runner builds between the commits results.json records (through
    the sidecar: hil/runner/profiles.py runner_identity)."""
    from hil.runner.profiles import runner_identity

    git = ["git", "-C", str(fakes["work"]), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fake checkout"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    done = build_android(fakes)
    assert done.returncode == 0, done.stderr
    runner = fakes["out"] / "runner" / "enn_executor_runner"
    identity = runner_identity(runner)
    assert (identity["commit"], identity["profile"], identity["built_by"]) == (head, "hil", "scripts/build-enn.sh")
    runner.write_bytes(runner.read_bytes() + b"\0")  # another binary: the sidecar is not its own
    assert runner_identity(runner)["commit"] is None
