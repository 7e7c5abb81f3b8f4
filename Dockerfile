# exynos-hil container image. Targets:
#   host    hil + ExecuTorch's host runtime: virtual boards, flows xnnpack/portable, real boards
#           over adb. No SDK. Builds with the legacy builder or BuildKit (and the docker SDK).
#   exynos  host + LITECORE 1.1.0 + ExecuTorch v1.5.1's Samsung AOT wrapper (flow enn) + the
#           Android enn_executor_runner. Needs BuildKit (DOCKER_BUILDKIT=1 or buildx): the SDK
#           comes from the secret `litecore_apikey` or from a tarball in the named build context
#           `litecore-tarball`. The SDK's files are in its layers: keep that image private.
# Every build argument, secret and named context: docs/docker.md.
#
# The host stages come first: the legacy builder builds every stage up to its target.

ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS base
ARG DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Extra CA certificates (a corporate TLS proxy): every *.crt in docker/ca-certificates/.
COPY docker/ca-certificates/ /usr/local/share/ca-certificates/hil/
# bubblewrap: the virtual board's device sandbox. adb comes with adbutils. fastboot: Debian's
# client, what `hil flash` / `hil run --provision` drive (hil/provision/).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv bubblewrap fastboot \
 && update-ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/hil/venv \
    PATH=/opt/hil/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN python3 -m venv /opt/hil/venv

# ---------------------------------------------------------------------------------------------
# The Python stack. Only pyproject.toml is copied first, so editing hil's code keeps this layer.
FROM base AS pydeps
# Where pip looks (no credentials here: build arguments are visible in `docker history`).
# Users: PyPI plus PyTorch's CPU wheels. Air-gapped: PIP_NO_INDEX=1 and a served wheelhouse.
ARG PIP_INDEX_URL=https://pypi.org/simple
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_FIND_LINKS=
ARG PIP_NO_INDEX=
# torch (and torchvision, which the `models` suite needs) are installed from TORCH_SPEC, the
# rest of hil's dependencies from pyproject.toml without them. The default matches hil's pins;
# a torch without a matching torchvision (e.g. "torch==2.13.0") gives an image without `models`.
ARG TORCH_SPEC="torch==2.14.1 torchvision==0.29.1"
COPY pyproject.toml /opt/hil/src/pyproject.toml
# TORCH_SPEC is a list of pinned requirements (word splitting wanted); the rest is pinned in
# pyproject.toml (read with tomllib, or pip's own tomli on Python 3.10, e.g. Ubuntu 22.04);
# setuptools/wheel only build hil itself.
# hadolint ignore=SC2086,DL3013
RUN python -c "import sys; toml = __import__('tomllib' if sys.version_info >= (3, 11) else 'pip._vendor.tomli', fromlist=['load']); deps = toml.load(open('/opt/hil/src/pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(d for d in deps if not d.startswith(('torch=', 'torchvision='))))" \
      > /opt/hil/requirements.txt \
 && pip install ${TORCH_SPEC} \
 && pip install -r /opt/hil/requirements.txt "setuptools>=68" wheel

# ---------------------------------------------------------------------------------------------
FROM pydeps AS host
COPY README.md /opt/hil/src/README.md
COPY hil/ /opt/hil/src/hil/
RUN pip install --no-deps --no-build-isolation /opt/hil/src \
 && rm -rf /opt/hil/src/build \
 && useradd --create-home --uid 1000 --shell /bin/bash hil \
 && mkdir -p /workspace && chown hil:hil /workspace
USER 1000:1000
WORKDIR /workspace
ENTRYPOINT ["hil"]
CMD ["--help"]

# =============================================================================================
# exynos: everything below needs BuildKit. The legacy builder never reaches it for `host`.

# The LITECORE tarball, when not downloaded: a .tar.gz put in docker/litecore/ (hil replicate
# --litecore-sdk does that in its own copy of the context), or with buildx
#   docker buildx build --build-context litecore-tarball=DIR   (DIR holds the .tar.gz)
FROM scratch AS litecore-tarball
COPY docker/litecore/ /

# ExecuTorch's source, when not cloned: empty unless replaced with
#   docker buildx build --build-context executorch-src=DIR    (a v1.5.1 checkout with submodules)
FROM scratch AS executorch-src

# ---------------------------------------------------------------------------------------------
FROM base AS litecore
ARG DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl \
 && rm -rf /var/lib/apt/lists/*
ARG LITECORE_VERSION=1.1.0
ARG LITECORE_FILE=ai-litecore-ubuntu2204-v1.1.0.tar.gz
ARG LITECORE_URL=https://soc-developer.semiconductor.samsung.com/api/v1/resource/download-file
# Required: the tarball's SHA-256. Samsung publishes none that hil could pin, so there is no
# default: give the one of the tarball you trust, or LITECORE_SHA256=unverified (said in the log).
ARG LITECORE_SHA256=
COPY scripts/install-litecore.sh /usr/local/bin/install-litecore.sh
# The key is read from the secret's file by the script and sent as a header through a pipe: it
# is never an argument, an ARG/ENV, a file in a layer or a line in the log.
RUN --mount=type=secret,id=litecore_apikey \
    --mount=type=bind,from=litecore-tarball,target=/mnt/litecore-tarball \
    install-litecore.sh --dest /opt/litecore --version "${LITECORE_VERSION}" \
      --sha256 "${LITECORE_SHA256}" --tarball-dir /mnt/litecore-tarball \
      --url "${LITECORE_URL}/${LITECORE_FILE}" --apikey-file /run/secrets/litecore_apikey

# ---------------------------------------------------------------------------------------------
FROM pydeps AS enn-build
ARG DEBIAN_FRONTEND=noninteractive
# clang compiles the x86 wrapper (build-enn.sh picks it), as ExecuTorch's CI does: upstream
# builds with -Werror and is kept warning-free for clang, not GCC. The SDK must be LITECORE's
# Ubuntu 22.04 build (ai-litecore-ubuntu2204-*): its Ubuntu 24.04 build needs glibc 2.38+ and
# fails at import on this Debian 12 image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git cmake ninja-build clang g++ make python3-dev curl unzip file \
 && rm -rf /var/lib/apt/lists/*
ARG EXECUTORCH_GIT=https://github.com/pytorch/executorch.git
ARG EXECUTORCH_REF=v1.5.1
# v1.5.1's commit: fetched by commit, not by a tag that can move (another REF needs its COMMIT)
ARG EXECUTORCH_COMMIT=3b60683923245cf472b7323426920e15623ba361
COPY --from=litecore /opt/litecore /opt/litecore
COPY scripts/install-litecore.sh scripts/build-enn.sh scripts/hil-runner.cmake /usr/local/bin/
RUN --mount=type=bind,from=executorch-src,target=/mnt/executorch-src \
    build-enn.sh --sdk /opt/litecore --src /mnt/executorch-src --work /opt/executorch \
      --git "${EXECUTORCH_GIT}" --ref "${EXECUTORCH_REF}" --commit "${EXECUTORCH_COMMIT}" \
      --build x86_64 --out /opt/enn

# The Android runner, built with NDK r28c (BUILD_RUNNER=0: none; give one at run time with
# hil run --runner). RUNNER_PROFILE=hil (default) adds the XNNPACK delegate and the quantized
# kernels to upstream's runner (the host flows run on the board's CPU too); upstream builds it
# exactly as backends/samsung/build.sh does. The profile is recorded beside the binary
# (enn_executor_runner.profile.json), where hil run reads it. To use a prebuilt one instead
# (and skip the NDK): docker buildx build --build-context enn-runner=DIR (DIR holds
# enn_executor_runner, and its .profile.json if it has one; without one hil assumes upstream).
FROM enn-build AS enn-runner-build
ARG BUILD_RUNNER=1
ARG RUNNER_PROFILE=hil
ARG ANDROID_NDK_URL=https://dl.google.com/android/repository/android-ndk-r28c-linux.zip
# NDK r28c's published SHA-1 (android-ndk-r28c-linux.zip, 722261334 bytes)
ARG ANDROID_NDK_SHA1=a7b54a5de87fecd125a17d54f73c446199e72a64
RUN if [ "${BUILD_RUNNER}" = 1 ]; then \
      build-enn.sh --sdk /opt/litecore --work /opt/executorch --build android \
        --runner-profile "${RUNNER_PROFILE}" \
        --ndk-url "${ANDROID_NDK_URL}" --ndk-sha1 "${ANDROID_NDK_SHA1}" --out /opt/enn; \
    else mkdir -p /opt/enn/runner; fi

FROM scratch AS enn-runner
COPY --from=enn-runner-build /opt/enn/runner/ /

# ---------------------------------------------------------------------------------------------
FROM host AS exynos
USER 0:0
COPY --from=litecore /opt/litecore /opt/litecore
COPY --from=enn-runner / /opt/hil/runner/
RUN --mount=type=bind,from=enn-build,source=/opt/enn/python,target=/mnt/enn-python \
    target="$(python -c 'import executorch.backends as b, os; print(os.path.dirname(b.__file__))')/samsung/python" \
 && mkdir -p "$target" && cp /mnt/enn-python/Py*.so "$target/"
ENV EXYNOS_AI_LITECORE_ROOT=/opt/litecore \
    LD_LIBRARY_PATH=/opt/litecore/lib/x86_64-linux \
    HIL_RUNNER=/opt/hil/runner/enn_executor_runner
RUN python -c "import executorch.backends.samsung.python.PyEnnWrapperAdaptor" \
 && hil doctor --require sdk,enn-wrapper
USER 1000:1000
