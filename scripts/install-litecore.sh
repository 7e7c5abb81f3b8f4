#!/usr/bin/env bash
# Install and verify the Exynos AI LiteCore SDK (LITECORE) that ExecuTorch's Samsung backend
# builds against. Prints the SDK root on its last line (use it as EXYNOS_AI_LITECORE_ROOT).
#
# usage:
#   install-litecore.sh --dest DIR [--version 1.1.0] --sha256 HEX|unverified SOURCE...
#   install-litecore.sh --verify ROOT [--version 1.1.0]
# --sha256 is required: the tarball's SHA-256 (Samsung publishes none that hil could pin), or
# `unverified` to install a tarball unchecked, said on stderr.
# SOURCE, first usable one wins:
#   --tarball FILE        a local ai-litecore-*.tar.gz
#   --tarball-dir DIR     a folder holding exactly one ai-litecore-*.tar.gz (skipped when empty)
#   --url URL --apikey-file FILE
#                         download with the header `apikey: <key>`; the key is read from FILE
#                         (a BuildKit secret, /run/secrets/litecore_apikey) and piped to curl:
#                         it is never an argument, an environment variable or printed.
#                         Skipped when FILE is missing or empty. https only, redirects too
#                         (curl --proto =https); a redirect is followed by hand, and the key
#                         goes only to the URL's own origin (scheme, host, port): another
#                         host (a CDN's signed link) gets the request without it.
#                         CURL_CA_BUNDLE names extra CA certificates, as for curl.
# Layouts: the tarball as downloaded (one top folder, any name, stripped like ExecuTorch CI's
# `tar --strip-components=1`; or the SDK's folders at the top), and for --verify a folder
# unpacked with --strip-components=1 (any name). The version comes from ROOT/.litecore-version
# (written by this script), else from a `v<version>` in the top folder's or the tarball's
# name; a version that differs from --version is refused, an unknown one is accepted with a
# note (ExecuTorch's own set-up records none).
# Checks: the headers and x86-64 libraries the build needs are there; the tarball's SHA-256
# when --sha256 is given. A wrong layout or a failed check: one line on stderr, exit 3.
# Exit codes: 0 installed/verified · 3 bad usage, no source, or the SDK failed a check.
set -euo pipefail

REQUIRED_FILES=(
  include/graphgen_c.h
  include/graphgen_common.h
  include/graph_wrapper_api.h
  include/common-types.h
  lib/x86_64-linux/libgraphgen_api.so
  lib/x86_64-linux/libgraph_wrapper.so
)
VERSION_FILE=.litecore-version

version=1.1.0
dest=
verify=
sha256=
tarball=
tarball_dir=
url=
apikey_file=

die() { echo "install-litecore: $*" >&2; exit 3; }
note() { echo "install-litecore: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dest|--version|--sha256|--tarball|--tarball-dir|--url|--apikey-file|--verify)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --dest) dest=$2 ;;
        --version) version=${2#v} ;;
        --sha256) sha256=$2 ;;
        --tarball) tarball=$2 ;;
        --tarball-dir) tarball_dir=$2 ;;
        --url) url=$2 ;;
        --apikey-file) apikey_file=$2 ;;
        --verify) verify=$2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

# version_in NAME: the <version> of a `v<version>` in NAME (e.g. ai-litecore-ubuntu2204-v1.1.0.tar.gz),
# or nothing.
version_in() {
  local name=${1%.tar.gz}
  name=${name%.tgz}
  if [[ "$name" =~ v([0-9]+(\.[0-9]+)+)$ ]]; then echo "${BASH_REMATCH[1]}"; fi
}

# check_version FOUND WHERE: refuse another version; note an unknown one.
check_version() {
  if [ -z "$1" ]; then
    note "$2 does not say its version (no $VERSION_FILE, no v<version> in its name): assuming $version"
  elif [ "$1" != "$version" ]; then
    die "LITECORE at $2 is version $1, need $version"
  fi
}

# check_root ROOT: the required files, each library an x86-64 ELF shared object.
check_root() {
  local root=$1 file magic sub
  if [ ! -d "$root/include" ] && [ ! -d "$root/lib" ]; then
    sub=$(find "$root" -mindepth 2 -maxdepth 2 -type d -name include -printf '%h\n' 2>/dev/null | head -n 1)
    [ -z "$sub" ] || die "$root is not an SDK root (no include/, lib/) but $sub is: use that folder, or unpack with tar --strip-components=1"
  fi
  for file in "${REQUIRED_FILES[@]}"; do
    [ -f "$root/$file" ] || die "LITECORE at $root is incomplete: missing $file"
  done
  for file in "${REQUIRED_FILES[@]}"; do
    case "$file" in *.so) ;; *) continue ;; esac
    # ELF magic, 64-bit class (byte 4 = 2), e_machine x86-64 (bytes 18-19 = 3e 00).
    magic=$(od -An -tx1 -N20 "$root/$file" | tr -d ' \n')
    [ "${magic:0:8}" = 7f454c46 ] || die "$root/$file is not an ELF shared library"
    [ "${magic:8:2}" = 02 ] && [ "${magic:36:4}" = 3e00 ] \
      || die "$root/$file is not an x86-64 library (LITECORE's host libraries are x86_64 Linux only)"
  done
}

if [ -n "$verify" ]; then
  [ -d "$verify" ] || die "--verify: no such folder: $verify"
  check_root "$verify"
  if [ -f "$verify/$VERSION_FILE" ]; then
    check_version "$(cat "$verify/$VERSION_FILE")" "$verify"
  else
    check_version "$(version_in "$(basename "$(cd "$verify" && pwd)")")" "$verify"
  fi
  cd "$verify" && pwd
  exit 0
fi

[ -n "$dest" ] || die "--dest is required (or --verify ROOT)"
case "${sha256,,}" in
  unverified) ;;
  "") die "--sha256 is required: the tarball's SHA-256 (docker build: --build-arg LITECORE_SHA256=HEX), or unverified to install it unchecked" ;;
  *) [[ "${sha256,,}" =~ ^[0-9a-f]{64}$ ]] || die "--sha256: '$sha256' is not 64 hex digits (or unverified)" ;;
esac

# origin_of URL: scheme://host[:port] of URL, lower-cased (the key's only destination).
origin_of() {
  local rest=${1#*://}
  rest=${rest%%[/?#]*}
  printf '%s://%s' "${1%%://*}" "${rest,,}" | tr '[:upper:]' '[:lower:]'
}

# download URL FILE: GET URL into FILE over https only, following up to 5 redirects by hand:
# the apikey header (from stdin: never in curl's arguments) goes only to URL's own origin.
download() {
  local current=$1 origin hops=0 reply code next
  origin=$(origin_of "$1")
  while :; do
    case "$current" in
      https://*) ;;
      *) die "download of ${url##*/}: refusing ${current%%[?#]*} (redirect $hops): LITECORE is fetched over https only, the API key never leaves it" ;;
    esac
    if [ "$(origin_of "$current")" = "$origin" ]; then
      reply=$({ printf 'apikey: '; tr -d '\r\n' <"$apikey_file"; printf '\n'; } \
        | curl --proto =https --proto-redir =https --silent --show-error --retry 3 -H @- \
            -o "$2" -w '%{http_code} %{redirect_url}' "$current") || return 1
    else
      reply=$(curl --proto =https --proto-redir =https --silent --show-error --retry 3 \
        -o "$2" -w '%{http_code} %{redirect_url}' "$current") || return 1
    fi
    code=${reply%% *}
    next=${reply#* }
    case "$code" in
      2??) return 0 ;;
      301|302|303|307|308)
        hops=$((hops + 1))
        [ -n "$next" ] && [ "$hops" -le 5 ] || return 1
        current=$next ;;
      *) die "download of ${url##*/} failed: HTTP $code from ${current%%[?#]*} (check the API key and the URL)" ;;
    esac
  done
}

work=$(mktemp -d "${TMPDIR:-/tmp}/litecore.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$tarball" ] && [ -n "$tarball_dir" ] && [ -d "$tarball_dir" ]; then
  shopt -s nullglob
  candidates=("$tarball_dir"/*.tar.gz "$tarball_dir"/*.tgz)
  shopt -u nullglob
  if [ ${#candidates[@]} -gt 1 ]; then
    die "--tarball-dir $tarball_dir holds ${#candidates[@]} tarballs; keep exactly one"
  fi
  [ ${#candidates[@]} -eq 1 ] && tarball=${candidates[0]}
fi

if [ -n "$tarball" ]; then
  [ -f "$tarball" ] || die "--tarball: no such file: $tarball"
  note "using $tarball"
elif [ -n "$url" ] && [ -n "$apikey_file" ] && [ -s "$apikey_file" ]; then
  command -v curl >/dev/null 2>&1 || die "curl is needed to download LITECORE"
  note "downloading ${url##*/}"
  tarball=$work/${url##*/}
  download "$url" "$tarball" || die "download of ${url##*/} failed (check the API key and the URL)"
else
  die "no LITECORE source: give --tarball FILE, a --tarball-dir with the SDK tarball, or --url with a non-empty --apikey-file (BuildKit: --secret id=litecore_apikey,env=KEY or src=FILE)"
fi

if [ "$sha256" = unverified ]; then
  note "${tarball##*/}: not verified (--sha256 unverified): sha256 $(sha256sum "$tarball" | cut -d' ' -f1)"
else
  actual=$(sha256sum "$tarball" | cut -d' ' -f1)
  [ "$actual" = "${sha256,,}" ] || die "checksum mismatch for ${tarball##*/}: sha256 $actual, expected $sha256"
fi

listing=$(tar -tzf "$tarball" 2>/dev/null) || die "${tarball##*/} is not a gzip tar archive"
tops=$(printf '%s\n' "$listing" | sed -e 's|^\./||' -e 's|/.*||' | grep -v '^$' | sort -u)
[ -n "$tops" ] || die "${tarball##*/} is empty"
mkdir -p "$work/unpacked"
if printf '%s\n' "$tops" | grep -qx -e include -e lib; then
  # The SDK's folders at the top: nothing to strip.
  tar -xzf "$tarball" -C "$work/unpacked" --no-same-owner
  found=$(version_in "${tarball##*/}")
else
  [ "$(printf '%s\n' "$tops" | wc -l)" = 1 ] \
    || die "${tarball##*/} has several top folders ($(echo $tops)) and no include/ or lib/: not a LITECORE SDK"
  # One top folder, whatever its name: stripped, as ExecuTorch CI unpacks the SDK.
  tar -xzf "$tarball" -C "$work/unpacked" --no-same-owner --strip-components=1
  found=$(version_in "$tops")
  [ -n "$found" ] || found=$(version_in "${tarball##*/}")
fi
root=$work/unpacked
check_root "$root"
check_version "$found" "${tarball##*/}${tops:+ ($(echo $tops))}"

mkdir -p "$dest"
[ -z "$(ls -A "$dest")" ] || die "--dest $dest is not empty"
cp -a "$root/." "$dest/"
[ -z "$found" ] || echo "$found" >"$dest/$VERSION_FILE"
note "LITECORE $version installed"
cd "$dest" && pwd
