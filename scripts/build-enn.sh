#!/usr/bin/env bash
# Build ExecuTorch's Samsung (ENN) backend pieces against LITECORE with ExecuTorch's own
# backends/samsung/build.sh:
#   x86_64   the AOT wrapper (PyEnnWrapperAdaptor, PyGraphWrapperAdaptor) -> OUT/python/,
#            checked by importing it with the SDK's libraries; compiled with clang (CC=clang
#            CXX=clang++ unless CC/CXX are set), as ExecuTorch's CI does: upstream builds with
#            -Werror, and GCC warns where clang does not
#   android  the device runner enn_executor_runner (arm64-v8a, android-28, Release) built with
#            Android NDK r28c -> OUT/runner/, checked to be an aarch64 ELF, with its profile
#            recorded beside it (OUT/runner/enn_executor_runner.profile.json: profile, sha256,
#            the ExecuTorch commit it was built from):
#              upstream  ExecuTorch's backends/samsung/build.sh as it is: ENN + portable kernels,
#                        in build.sh's own folder WORK/build_samsung_android
#              hil       (default) the same configure plus the XNNPACK delegate and the quantized
#                        kernels (scripts/hil-runner.cmake): the host flows run on the board too;
#                        in WORK/build_samsung_android_hil
#            One build folder per profile: CMake's cache would keep XNNPACK linked into an
#            upstream build made after a hil one in the same folder (its sidecar saying upstream).
#            The runner's layout is the checkout's: ExecuTorch 1.5.1 defines enn_executor_runner
#            in backends/samsung/CMakeLists.txt, inside its own build (BUILD/backends/samsung/);
#            newer ExecuTorch builds it from examples/samsung/CMakeLists.txt, a CMake project of
#            its own against the build's install (BUILD/examples/samsung/, examples/samsung/
#            build.sh). The sidecar also lists what the runner's link line linked (backends,
#            kernel libraries), read from its build (link.txt or build.ninja): the profile follows
#            the build, not the profile's name.
#
# usage: build-enn.sh --sdk DIR --build x86_64|android|all --out DIR
#                     [--work DIR] [--src DIR] [--git URL] [--ref v1.5.1 --commit SHA]
#                     [--ndk DIR | --ndk-url URL --ndk-sha1 HEX|unverified] [--python PY]
#                     [--runner-profile hil|upstream]
#   --sdk     LITECORE root (verified with install-litecore.sh --verify)
#   --work    the ExecuTorch checkout to build in (kept between calls; default ./executorch)
#   --src     copy this checkout (with submodules) into --work instead of cloning
#   --git/--ref/--commit  fetch COMMIT (REF's, checked) of URL with submodules when --work has
#                no checkout (default https://github.com/pytorch/executorch.git v1.5.1, commit
#                3b60683923245cf472b7323426920e15623ba361); another --ref needs its --commit
#   --ndk-sha1   the NDK zip's published SHA-1 (required with --ndk-url; `unverified` to skip)
#   --python  the Python with torch and executorch 1.5.1 (default: python3 on PATH)
# Prints OUT on its last line. Exit codes: 0 built · 3 bad usage or input · other: the
# build's own failure (its output is shown).
#
# Not runnable on hil's development machines (no SDK, no GitHub, no NDK download): its
# argument and input checks, and its android steps against a FAKE ExecuTorch checkout, NDK and
# cmake, are tested there; scripts/hil-runner.cmake is tested with the real cmake on a toy
# project (both layouts). The real Android build of either profile, in either layout, has not run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
sdk= build= out= src= ndk= ndk_url= ndk_sha1=
work=$PWD/executorch
git_url=https://github.com/pytorch/executorch.git
ref=v1.5.1
commit=
pinned_commit=3b60683923245cf472b7323426920e15623ba361  # v1.5.1 (executorch 1.5.1's version.py)
python=python3
runner_profile=hil

die() { echo "build-enn: $*" >&2; exit 3; }
note() { echo "build-enn: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --sdk|--build|--out|--work|--src|--git|--ref|--commit|--ndk|--ndk-url|--ndk-sha1|--python|--runner-profile)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --sdk) sdk=$2 ;; --build) build=$2 ;; --out) out=$2 ;; --work) work=$2 ;;
        --src) src=$2 ;; --git) git_url=$2 ;; --ref) ref=$2 ;; --ndk) ndk=$2 ;;
        --ndk-url) ndk_url=$2 ;; --ndk-sha1) ndk_sha1=$2 ;; --python) python=$2 ;;
        --runner-profile) runner_profile=$2 ;; --commit) commit=$2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

case "$build" in
  x86_64|android|all) ;;
  "") die "--build is required (x86_64, android or all)" ;;
  *) die "--build: unknown target '$build' (x86_64, android or all)" ;;
esac
case "$runner_profile" in
  hil|upstream) ;;
  *) die "--runner-profile: unknown profile '$runner_profile' (hil or upstream)" ;;
esac
if [ -z "$commit" ]; then
  [ "$ref" = v1.5.1 ] || die "--ref $ref needs --commit SHA (ExecuTorch is fetched by commit)"
  commit=$pinned_commit
fi
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] || die "--commit: '$commit' is not a 40-hex commit"
[ -n "$sdk" ] || die "--sdk is required (the LITECORE root)"
[ -n "$out" ] || die "--out is required"
installer=$here/install-litecore.sh
[ -x "$installer" ] || installer=$(command -v install-litecore.sh) || die "install-litecore.sh not found"
sdk=$("$installer" --verify "$sdk" | tail -n 1) || exit 3
command -v "$python" >/dev/null 2>&1 || die "--python: $python not found"
"$python" -c "import executorch, torch" 2>/dev/null \
  || die "--python $python cannot import executorch and torch (install hil's Python stack first)"

# -- the checkout ---------------------------------------------------------------------------
if [ ! -f "$work/backends/samsung/build.sh" ]; then
  if [ -n "$src" ] && [ -f "$src/backends/samsung/build.sh" ]; then
    note "copying the ExecuTorch checkout from $src"
    mkdir -p "$work"
    cp -a "$src/." "$work/"
  elif [ -n "$src" ] && [ -n "$(ls -A "$src" 2>/dev/null)" ]; then
    die "--src $src is not an ExecuTorch checkout (no backends/samsung/build.sh)"
  else
    command -v git >/dev/null 2>&1 || die "git is needed to clone ExecuTorch (or give --src)"
    note "fetching ExecuTorch $ref (commit $commit)"
    { git init --quiet "$work" && git -C "$work" remote add origin "$git_url" \
        && git -C "$work" fetch --quiet --depth 1 origin "$commit" \
        && git -C "$work" checkout --quiet FETCH_HEAD; } \
      || die "cannot fetch $git_url at $commit ($ref) (offline? give --src with a checkout)"
    [ "$(git -C "$work" rev-parse HEAD)" = "$commit" ] || die "$work is not at commit $commit"
    git -C "$work" submodule update --quiet --init --recursive --depth 1 \
      || git -C "$work" submodule update --quiet --init --recursive \
      || die "cannot fetch ExecuTorch's submodules"
  fi
fi
if [ -f "$work/version.txt" ]; then
  case "$(cat "$work/version.txt")" in
    "${ref#v}"*) ;;
    *) note "warning: $work is ExecuTorch $(cat "$work/version.txt"), not ${ref#v}" ;;
  esac
fi

export EXYNOS_AI_LITECORE_ROOT=$sdk
export LD_LIBRARY_PATH=$sdk/lib/x86_64-linux${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# build.sh's cmake finds Python (torch, executorch, pybind11 headers) on PATH.
PATH=$(dirname "$(command -v "$python")"):$PATH
export PATH
mkdir -p "$out"

# -- x86_64: the AOT wrapper ------------------------------------------------------------------
if [ "$build" = x86_64 ] || [ "$build" = all ]; then
  compilers=()
  if [ -n "${CC:-}${CXX:-}" ]; then
    note "building the AOT wrapper (x86_64, CC=${CC:-} CXX=${CXX:-} as set)"
  elif command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1; then
    compilers=(CC=clang CXX=clang++)
    note "building the AOT wrapper (x86_64, clang)"
  else
    note "warning: no clang on PATH: building the AOT wrapper with the default compiler" \
      "(upstream's -Werror is kept clean for clang, as its CI builds)"
  fi
  (cd "$work" && env "${compilers[@]}" bash backends/samsung/build.sh --sdk "$sdk" --build x86_64)
  mkdir -p "$out/python"
  shopt -s nullglob
  built=("$work"/backends/samsung/python/Py*.so)
  shopt -u nullglob
  [ ${#built[@]} -gt 0 ] || die "the x86_64 build produced no backends/samsung/python/Py*.so"
  cp -f "${built[@]}" "$out/python/"
  (cd "$out/python" && "$python" -c "import PyEnnWrapperAdaptor, PyGraphWrapperAdaptor") \
    || die "the built wrapper does not import (check LD_LIBRARY_PATH=$sdk/lib/x86_64-linux)"
fi

# -- android: the runner ----------------------------------------------------------------------
if [ "$build" = android ] || [ "$build" = all ]; then
  if [ -z "$ndk" ]; then
    [ -n "$ndk_url" ] || die "--build android needs --ndk DIR or --ndk-url URL (NDK r28c)"
    [ -n "$ndk_sha1" ] || die "--ndk-url needs --ndk-sha1 HEX (the published SHA-1 of the zip; unverified to skip)"
    command -v curl >/dev/null 2>&1 && command -v unzip >/dev/null 2>&1 \
      || die "curl and unzip are needed to fetch the NDK"
    note "downloading ${ndk_url##*/}"
    mkdir -p "$work/.ndk"
    curl --proto =https --proto-redir =https --fail --silent --show-error --location --retry 3 \
        -o "$work/.ndk/ndk.zip" "$ndk_url" \
      || die "cannot download the NDK from $ndk_url (https only)"
    actual=$(sha1sum "$work/.ndk/ndk.zip" | cut -d' ' -f1)
    if [ "$ndk_sha1" = unverified ]; then
      note "the NDK zip is not verified (--ndk-sha1 unverified): sha1 $actual"
    else
      [ "$actual" = "$ndk_sha1" ] || die "NDK checksum mismatch: sha1 $actual, expected $ndk_sha1"
    fi
    unzip -q -o "$work/.ndk/ndk.zip" -d "$work/.ndk"
    rm -f "$work/.ndk/ndk.zip"
    ndk=$(find "$work/.ndk" -mindepth 1 -maxdepth 1 -type d -name 'android-ndk-*' | head -n 1)
  fi
  [ -f "$ndk/build/cmake/android.toolchain.cmake" ] || die "--ndk $ndk is not an Android NDK"
  layout=tree
  if [ -f "$work/examples/samsung/CMakeLists.txt" ] \
      && grep -q 'add_executable(enn_executor_runner' "$work/examples/samsung/CMakeLists.txt"; then
    layout=examples
  fi
  note "building enn_executor_runner (android arm64-v8a, runner profile $runner_profile, $layout layout)"
  toolchain=(
    -DCMAKE_TOOLCHAIN_FILE="$ndk/build/cmake/android.toolchain.cmake"
    -DANDROID_NDK="$ndk"
    -DANDROID_ABI=arm64-v8a
    -DANDROID_PLATFORM=android-28
    -DCMAKE_BUILD_TYPE=Release
  )
  if [ "$runner_profile" = upstream ]; then
    build_dir=build_samsung_android  # build.sh's own, fixed
    cache=$work/$build_dir/CMakeCache.txt
    if [ -f "$cache" ] && grep -qE '^(EXECUTORCH_BUILD_XNNPACK:BOOL=ON|CMAKE_PROJECT_executorch_INCLUDE)' "$cache"; then
      # a hil-profile build made there before folders were per profile: its cache would keep
      # XNNPACK and the quantized kernels linked into this upstream runner
      note "removing $work/$build_dir: it was configured for the hil profile"
      rm -rf "${work:?}/$build_dir"
    fi
    (cd "$work" && ANDROID_NDK=$ndk bash backends/samsung/build.sh --sdk "$sdk" --ndk "$ndk" --build android)
    if [ "$layout" = examples ] && [ ! -f "$work/$build_dir/examples/samsung/enn_executor_runner" ]; then
      # upstream's own script for the runner's project, when build.sh has not run it
      (cd "$work" && ANDROID_NDK_ROOT=$ndk ANDROID_NDK=$ndk bash examples/samsung/build.sh)
    fi
  else
    build_dir=build_samsung_android_hil
    include=$here/hil-runner.cmake
    [ -f "$include" ] || include=$(command -v hil-runner.cmake) || die "hil-runner.cmake not found"
    # The hook goes where the runner is defined: ExecuTorch's own project (tree layout), or the
    # runner's project in examples/samsung (examples layout: any project() there includes it).
    hook=(-DCMAKE_PROJECT_executorch_INCLUDE="$include")
    [ "$layout" = tree ] || hook=()
    # backends/samsung/build.sh's build_android(), option for option, plus the hil profile's
    # libraries (its cmake line takes no extra options, so it is repeated here).
    (cd "$work" && cmake \
        -DCMAKE_INSTALL_PREFIX="$work/$build_dir" \
        "${toolchain[@]}" \
        -DEXECUTORCH_BUILD_ENN=ON \
        -DEXYNOS_AI_LITECORE_ROOT="$sdk" \
        -DEXECUTORCH_BUILD_EXTENSION_MODULE=ON \
        -DEXECUTORCH_BUILD_EXTENSION_DATA_LOADER=ON \
        -DEXECUTORCH_BUILD_EXTENSION_FLAT_TENSOR=ON \
        -DEXECUTORCH_BUILD_EXTENSION_NAMED_DATA_MAP=ON \
        -DEXECUTORCH_BUILD_EXTENSION_TENSOR=ON \
        -DEXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL=ON \
        -DEXECUTORCH_ENABLE_LOGGING=1 \
        -DEXECUTORCH_BUILD_DEVTOOLS=ON \
        -DEXECUTORCH_ENABLE_EVENT_TRACER=ON \
        -DEXECUTORCH_BUILD_XNNPACK=ON \
        -DEXECUTORCH_BUILD_CPUINFO=ON \
        -DEXECUTORCH_BUILD_PTHREADPOOL=ON \
        -DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON \
        "${hook[@]}" \
        -S . -B "$build_dir" \
      && cmake --build "$build_dir" -j "$(nproc)" --target install)
    if [ "$layout" = examples ]; then
      # examples/samsung/build.sh's configure, against this profile's install
      prefix="$work/$build_dir/lib/cmake/ExecuTorch;$work/$build_dir/third-party/gflags"
      prefix="$prefix;$work/$build_dir/lib/cmake/tokenizers;$work/$build_dir/lib/cmake/re2;$work/$build_dir/lib/cmake/absl"
      (cd "$work" && cmake \
          -DCMAKE_PREFIX_PATH="$prefix" \
          "${toolchain[@]}" \
          -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=BOTH \
          -DCMAKE_PROJECT_INCLUDE="$include" \
          -S examples/samsung -B "$build_dir/examples/samsung" \
        && cmake --build "$build_dir/examples/samsung" --config Release)
    fi
  fi
  if [ "$layout" = examples ]; then
    runner=$work/$build_dir/examples/samsung/enn_executor_runner
  else
    runner=$work/$build_dir/backends/samsung/enn_executor_runner
  fi
  [ -f "$runner" ] || die "the android build produced no $runner"
  magic=$(od -An -tx1 -N20 "$runner" | tr -d ' \n')
  [ "${magic:0:8}" = 7f454c46 ] && [ "${magic:36:4}" = b700 ] \
    || die "$runner is not an aarch64 ELF executable"
  mkdir -p "$out/runner"
  cp -f "$runner" "$out/runner/enn_executor_runner"
  chmod 0755 "$out/runner/enn_executor_runner"
  # What hil reads to learn what this binary can execute (hil/runner/profiles.py): its
  # profile, and what its link line linked (CMake's link.txt, or build.ninja's link statement).
  linked=
  link_txt=$(dirname "$runner")/CMakeFiles/enn_executor_runner.dir/link.txt
  if [ -f "$link_txt" ]; then
    linked=$(cat "$link_txt")
  else
    for ninja in "$(dirname "$runner")/build.ninja" "$work/$build_dir/build.ninja"; do
      if [ -f "$ninja" ]; then
        linked=$(awk '/^build [^:]*enn_executor_runner:/ { on = 1 } on && /^$/ { exit } on' "$ninja")
        [ -z "$linked" ] || break
      fi
    done
  fi
  contents=
  if [ -n "$linked" ]; then
    backends= kernels=
    case "$linked" in *enn_backend*) backends='"EnnBackend"' ;; esac
    case "$linked" in *xnnpack_backend*) backends="$backends${backends:+, }\"XnnpackBackend\"" ;; esac
    case "$linked" in *portable_ops_lib*) kernels='"portable"' ;; esac
    case "$linked" in *quantized_ops_lib*) kernels="$kernels${kernels:+, }\"quantized\"" ;; esac
    contents=$(printf ',\n  "backends": [%s],\n  "kernel_libraries": [%s]' "$backends" "$kernels")
  else
    note "warning: no link line of enn_executor_runner found: its sidecar names the profile only"
  fi
  digest=$(sha256sum "$out/runner/enn_executor_runner" | cut -d' ' -f1)
  # the commit it was built from: `hil bisect` bisects runner builds between two of them
  commit=$(git -C "$work" rev-parse HEAD 2>/dev/null || true)
  printf '{\n  "profile": "%s",\n  "sha256": "%s",\n  "executorch": "%s",\n  "commit": "%s",\n  "built_by": "scripts/build-enn.sh"%s\n}\n' \
    "$runner_profile" "$digest" "$ref" "$commit" "$contents" > "$out/runner/enn_executor_runner.profile.json"
fi

cd "$out" && pwd
