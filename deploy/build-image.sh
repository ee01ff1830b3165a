#!/usr/bin/env bash
# Build forewarn's container image (Containerfile) with podman where no image registry is
# reachable: the base is Debian made here with debootstrap, the wheels are made on this host.
#
#   sudo deploy/build-image.sh                        # localhost/forewarn:latest
#   sudo deploy/build-image.sh --tag localhost/forewarn:ci --tag localhost/forewarn:latest \
#       --python .venv/bin/python                     # as .ci/container does
#
# Needs root (debootstrap), podman, debootstrap and a Python with pip (3.11 or later; the one
# running forewarn's checkout will do). With a registry at hand, `podman build -t forewarn .`
# is all it takes; this script is the way without one, and the one CI uses (.ci/container).
#
# - The base is Debian bookworm made with debootstrap from the mirror apt uses, trimmed and
#   imported. It is kept between runs under a tag naming everything it is made from (suite,
#   mirror, packages, this trimming), so a change to any of them makes a new one; it is also
#   remade when over a week old, as the archive moves on with security updates. A fresh machine
#   makes it in a few minutes.
# - HTTPS may not work from inside a build (a proxy's CA trusted by the host only), so the
#   wheels are made on the host for the base's Python and C library, and the build installs
#   them from a read-only volume with --no-index.
set -euo pipefail
cd "$(dirname "$0")/.."

TAGS=()
PYTHON=${PYTHON:-python3}
usage() {
  echo "usage: $0 [--tag IMAGE]... [--python PYTHON]   (default localhost/forewarn:latest, $PYTHON)"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAGS+=("${2:?--tag needs an image name}"); shift 2 ;;
    --python) PYTHON=${2:?--python needs an interpreter}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[ ${#TAGS[@]} -gt 0 ] || TAGS=(localhost/forewarn:latest)
IMAGE=${TAGS[0]}
tag_options=()
for tag in "${TAGS[@]}"; do tag_options+=(--tag "$tag"); done

SUITE=bookworm
PACKAGES=python3,python3-venv
MAX_BASE_AGE_DAYS=7
PATH="$PATH:/usr/sbin:/sbin"

say() { printf 'build-image: %s\n' "$*"; }
fail() { say "$*" >&2; exit 1; }
for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (apt-get install -y $tool)"
done
"$PYTHON" -m pip --version >/dev/null 2>&1 || fail "$PYTHON has no pip (pass --python PYTHON)"
[ "$(id -u)" = 0 ] || fail "debootstrap needs root: run it with sudo"

started=$SECONDS
work=$(mktemp -d /tmp/forewarn-build-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The Debian mirror apt uses here (deb822 .sources or one-line .list), else Debian's own.
mirror() {
  local found
  found=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' \
    | grep -E '/debian/?$' | head -n1 || true)
  if [ -z "$found" ]; then
    found=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }' \
      | grep -E '/debian/?$' | head -n1 || true)
  fi
  echo "${found:-http://deb.debian.org/debian}"
}

# What the image does not need of a minimal Debian: apt's caches and lists, logs, manual
# pages, translations, and documentation but the copyright files.
trim_rootfs() {
  local root=$1
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
  find "$root"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
  find "$root"/usr/share/doc -mindepth 1 -type d -empty -delete
}

MIRROR=$(mirror)
KEY=$(printf '%s\n' "$SUITE" "$MIRROR" "$PACKAGES" "$(declare -f trim_rootfs)" \
  | sha256sum | cut -c1-16)
BASE="localhost/forewarn-base:$SUITE-$KEY"

base_is_fresh() {
  local created
  created=$(podman image inspect --format '{{.Created.Unix}}' "$BASE" 2>/dev/null) || return 1
  [ $(($(date +%s) - created)) -lt $((MAX_BASE_AGE_DAYS * 86400)) ]
}

if base_is_fresh; then
  say "base $BASE, kept from an earlier run"
else
  t=$SECONDS
  rootfs="$work/rootfs"
  if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log"
    fail "debootstrap of $SUITE from $MIRROR failed"
  fi
  trim_rootfs "$rootfs"
  tar -C "$rootfs" -c . | podman import --quiet - "$BASE" >/dev/null
  rm -rf "$rootfs"
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' \
    --filter reference=localhost/forewarn-base); do
    [ "$old" = "$BASE" ] || podman rmi "$old" >/dev/null 2>&1 || true
  done
  say "base $BASE made from $MIRROR in $((SECONDS - t)) s"
fi

# Wheels for the base's Python and C library, from the indexes the host's pip uses.
t=$SECONDS
read -r py glibc < <(podman run --rm --network none "$BASE" python3 -c \
  'import platform, sys; print("%d.%d" % sys.version_info[:2], platform.libc_ver()[1])')
arch=$(uname -m)
platforms=(--platform "linux_$arch")
for minor in $(seq 5 "${glibc#2.}"); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
platforms+=(--platform "manylinux2014_$arch" --platform "manylinux2010_$arch")
platforms+=(--platform "manylinux1_$arch")
mkdir "$work/wheels"
"$PYTHON" -m pip wheel -qq --no-deps --wheel-dir "$work/wheels" .
wheel=$(ls "$work"/wheels/forewarn-*.whl)
"$PYTHON" -m pip download -qq --only-binary=:all: --dest "$work/wheels" \
  --python-version "$py" --implementation cp --abi "cp${py/./}" --abi abi3 --abi none \
  "${platforms[@]}" "forewarn[postgres] @ file://$wheel" "setuptools>=77" wheel
say "wheels for Python $py, glibc $glibc in $((SECONDS - t)) s"

t=$SECONDS
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ! podman build --format docker --layers=false --file Containerfile \
  --build-arg BASE="$BASE" --build-arg PIP_INSTALL_OPTIONS="--no-index --find-links /wheels" \
  --volume "$work/wheels:/wheels:ro" "${tag_options[@]}" . >"$work/build.log" 2>&1; then
  cat "$work/build.log"
  fail "podman build failed"
fi
# What podman itself warns of (a missing or unused build argument, say), one line each.
grep -E 'level=warning|^\[Warning\]' "$work/build.log" | sed 's/^/build-image: warning: /' >&2 || true
current=$(podman image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true # the last run's image, now untagged
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
say "image $IMAGE built in $((SECONDS - t)) s ($((SECONDS - started)) s in all): $((size / 1000000)) MB"
