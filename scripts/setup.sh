#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs, from Debian's packages, everything asynctraced builds and tests
# with (docs/dependencies.md says why each one is here). Idempotent and quick
# when all is in place; installs as root, or through sudo when not root.
set -eu

PACKAGES="
make gcc clang llvm binutils
libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libdeflate-dev
libiberty-dev libcapstone-dev
libcap-dev libseccomp-dev libcap2-bin
protobuf-compiler
systemtap-sdt-dev
libcmocka-dev
libmicrohttpd-dev libjson-c-dev prometheus curl scdoc man-db systemd
python3
strace wrk
cargo rustc librust-tokio-dev
golang-go
"

missing=
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

# As root, apt-get itself: a fresh server or container has no sudo.
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "setup: installing$missing needs root, and there is no sudo here:" \
			"run it as root (make demo, make test)" >&2
		exit 1
	fi
	SUDO=sudo
fi
echo "setup: installing$missing${SUDO:+ (with sudo)}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
