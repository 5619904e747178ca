#!/usr/bin/env bash
# Runs the conformance suite with the reference backend in a foreign Debian userland and checks
# the golden hashes there (docs/conformance.md, "Other platforms").
#
#   sudo scripts/crossplatform/run.sh [i386|arm64] [--record]
#
#   i386   32-bit x86 userland (debootstrap --arch=i386), run natively by the x86-64 kernel
#   arm64  64-bit ARM userland (debootstrap --foreign --arch=arm64), run under qemu-user-static
#   --record  add the result to fixtures/conformance/v1/platforms.json (needs .venv)
#
# Needs root (debootstrap, chroot, mount). The rootfs lives outside git, in
# ${CVM_XPLAT_DIR:-/var/tmp/cvm-xplat}/ARCH, and is reused by later runs (delete it to start over).
# The repository is bind-mounted read-only at /cvm-src inside it; the userland has only Debian's
# python3, python3-numpy, python3-msgpack and python3-pycryptodome. Debian has no eth-hash package,
# so when `import eth_hash` fails there, scripts/crossplatform/shim (eth_hash.auto.keccak on
# Debian's pycryptodome, which is the Cryptodome package) is put on that python's sys.path only.
set -euo pipefail

ARCH=i386
RECORD=0
for arg in "$@"; do
  case "$arg" in
    i386|arm64) ARCH=$arg ;;
    --record) RECORD=1 ;;
    *) echo "usage: $0 [i386|arm64] [--record]" >&2; exit 2 ;;
  esac
done

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${CVM_XPLAT_DIR:-/var/tmp/cvm-xplat}
ROOT=$BASE/$ARCH
SUITE=${CVM_XPLAT_SUITE:-bookworm}
CASES=${CVM_CONFORMANCE_DIR:-fixtures/conformance/v1}
PKGS=python3,python3-numpy,python3-msgpack,python3-pycryptodome
DEBS=$BASE/debs-$ARCH  # downloaded .debs, kept so that rebuilding a rootfs needs no download
LABEL="debian-$SUITE-$ARCH"

[ "$(id -u)" = 0 ] || { echo "error: needs root (debootstrap, chroot, mount)" >&2; exit 2; }

# The Debian mirror this machine's apt uses (deb822 .sources or one-line .list), not -security.
mirror() {
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
      | grep -E '^(URIs:|deb )' | grep -v security | grep -oE 'https?://[^ ]*debian[^ ]*' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${CVM_XPLAT_MIRROR:-$(mirror)}

need_pkg() {  # need_pkg COMMAND PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  shift
  echo "== installing $*"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1; then
    apt-get update -q >/dev/null  # a fresh machine has no package lists yet
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
  fi
}

ensure_binfmt() {  # let the kernel run aarch64 binaries through qemu-aarch64-static
  need_pkg qemu-aarch64-static qemu-user-static binfmt-support
  need_pkg update-binfmts binfmt-support
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
  grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 \
    || { echo "error: binfmt_misc has no enabled qemu-aarch64 entry" >&2; exit 1; }
}

mounted() { grep -q " $1 " /proc/self/mounts; }

cleanup() {
  for m in "$ROOT/proc" "$ROOT/sys" "$ROOT/cvm-src"; do
    if mounted "$m"; then umount "$m" || umount -l "$m"; fi
  done
}

t0=$(date +%s)
need_pkg debootstrap debootstrap
if [ ! -f "$ROOT/.cvm-ready" ]; then
  cleanup
  rm -rf --one-file-system "$ROOT"
  mkdir -p "$BASE" "$DEBS"
  echo "== debootstrap $SUITE $ARCH from $MIRROR into $ROOT"
  case "$ARCH" in
    i386)
      need_pkg arch-test arch-test
      arch-test -n i386 >/dev/null || { echo "error: this kernel cannot run i386 binaries (no IA32 emulation)" >&2; exit 1; }
      debootstrap --cache-dir="$DEBS" --arch=i386 --variant=minbase --include="$PKGS" "$SUITE" "$ROOT" "$MIRROR" >"$BASE/$ARCH.log" 2>&1 \
        || { tail -n 20 "$BASE/$ARCH.log"; exit 1; }
      ;;
    arm64)
      ensure_binfmt
      debootstrap --cache-dir="$DEBS" --foreign --arch=arm64 --variant=minbase --include="$PKGS" "$SUITE" "$ROOT" "$MIRROR" >"$BASE/$ARCH.log" 2>&1 \
        || { tail -n 20 "$BASE/$ARCH.log"; exit 1; }
      chroot "$ROOT" /debootstrap/debootstrap --second-stage >>"$BASE/$ARCH.log" 2>&1 \
        || { tail -n 20 "$BASE/$ARCH.log"; exit 1; }
      ;;
  esac
  touch "$ROOT/.cvm-ready"
fi
[ "$ARCH" = arm64 ] && ensure_binfmt
t1=$(date +%s)

trap cleanup EXIT
mkdir -p "$ROOT/cvm-src" "$ROOT/cvm-out"
mounted "$ROOT/cvm-src" || { mount --bind "$REPO" "$ROOT/cvm-src" && mount -o remount,bind,ro "$ROOT/cvm-src"; }
mounted "$ROOT/proc" || mount -t proc proc "$ROOT/proc"

PERSONALITY=()  # i386: make uname (and so platform.machine()) say i686, not the kernel's x86_64
[ "$ARCH" = i386 ] && PERSONALITY=(setarch i686)
in_root() {
  "${PERSONALITY[@]}" chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PYPATH" /bin/sh -c "cd /cvm-src && $1"
}
PYPATH=/cvm-src
if ! in_root "python3 -c 'import eth_hash.auto'" 2>/dev/null; then
  PYPATH=/cvm-src:/cvm-src/scripts/crossplatform/shim
  echo "== eth_hash is not packaged here: using scripts/crossplatform/shim (Cryptodome.Hash.keccak)"
fi
in_root "uname -m; python3 -c 'import platform, numpy, msgpack; print(\"python\", platform.python_version(), \"numpy\", numpy.__version__, \"msgpack\", msgpack.version)'"

rm -f "$ROOT/cvm-out/result.json"
status=0
in_root "python3 -m cvm.cli conformance $CASES --backend reference --label $LABEL --json /cvm-out/result.json" || status=$?
t2=$(date +%s)
echo "== $LABEL: setup $((t1 - t0)) s, suite $((t2 - t1)) s, exit $status"

if [ "$RECORD" = 1 ] && [ -f "$ROOT/cvm-out/result.json" ]; then
  "$REPO/.venv/bin/python" -m cvm.conformance record "$ROOT/cvm-out/result.json" \
    --setup-seconds $((t1 - t0)) --run-seconds $((t2 - t1)) --platforms "$REPO/$CASES/platforms.json"
fi
exit $status
