#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs, from Debian's packages, everything asynctraced builds and tests
# with (docs/dependencies.md says why each one is here). Idempotent and quick
# when all is in place; needs root (or sudo) to install.
set -eu

PACKAGES="
make gcc clang llvm binutils
libbpf-dev bpftool libelf-dev zlib1g-dev
libiberty-dev libcapstone-dev
libcap-dev libseccomp-dev libcap2-bin
protobuf-compiler
systemtap-sdt-dev
libcmocka-dev
python3
cargo rustc librust-tokio-dev
"

missing=
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "setup: installing$missing"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
