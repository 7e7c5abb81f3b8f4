#!/usr/bin/env bash
# Make a Debian base image without a container registry: debootstrap a minimal root
# filesystem from a Debian mirror (or a local mirror in an air-gapped lab), then
# `docker import` it. Use the result as the Dockerfile's base:
#   docker build --build-arg BASE_IMAGE=local/debian:bookworm ...
#
# usage: scripts/offline-base-image.sh [--tag TAG] [--suite SUITE] [--mirror URL] [--force]
#   --tag     image to create (default local/debian:bookworm)
#   --suite   Debian release (default bookworm: Python 3.11, what the wheels are built for)
#   --mirror  Debian mirror (default http://deb.debian.org/debian)
#   --force   rebuild even when the tag exists
# Needs root (debootstrap), debootstrap and a docker client; honours DOCKER_HOST.
# Prints the image tag on its last line.
set -euo pipefail

tag=local/debian:bookworm
suite=bookworm
mirror=http://deb.debian.org/debian
force=0
docker_bin=${DOCKER:-docker}

die() { echo "offline-base-image: $*" >&2; exit 3; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; tag=$2; shift 2 ;;
    --suite) [ $# -ge 2 ] || die "--suite needs a value"; suite=$2; shift 2 ;;
    --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; mirror=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

[ "$(id -u)" = 0 ] || die "debootstrap needs root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found: apt-get install debootstrap"
command -v "$docker_bin" >/dev/null 2>&1 || die "docker client not found: apt-get install docker.io"
"$docker_bin" info >/dev/null 2>&1 || die "docker engine not reachable (DOCKER_HOST=${DOCKER_HOST:-default})"

if [ "$force" = 0 ] && "$docker_bin" image inspect "$tag" >/dev/null 2>&1; then
  echo "offline-base-image: $tag already present" >&2
  echo "$tag"
  exit 0
fi

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/hil-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
echo "offline-base-image: debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
  || { tail -n 20 "$rootfs.log" >&2; rm -f "$rootfs.log"; die "debootstrap failed"; }
rm -f "$rootfs.log"
# Smaller and reproducible-ish: no package lists or caches in the base layer.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
tar --numeric-owner -C "$rootfs" -c . \
  | "$docker_bin" import --change 'CMD ["/bin/bash"]' \
      --message "debootstrap --variant=minbase $suite $mirror" - "$tag" >/dev/null
echo "$tag"
