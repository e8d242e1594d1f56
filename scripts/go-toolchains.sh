#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetches the Go toolchains Debian ships beside bookworm's golang-go, for
# the Go version tests (docs/go.md, docs/testing.md): golang-1.N-go and
# golang-1.N-src from bookworm-backports (1.21-1.23), trixie (1.24) and
# trixie-backports (1.25-1.27), through apt-get, unpacked under DIR (its
# GOROOT: DIR/usr/lib/go-1.N, as Debian lays it out). Nothing
# is installed on the host: apt-get reads its own lists under DIR and only
# downloads; dpkg-deb unpacks. Idempotent: a toolchain already there is kept.
#
#   scripts/go-toolchains.sh DIR 1.21 1.22 ...
set -eu

[ $# -ge 2 ] || { echo "usage: $0 DIR VERSION..." >&2; exit 2; }
dir=$(mkdir -p "$1" && cd "$1" && pwd)
shift

want=
for v in "$@"; do
	[ -x "$dir/usr/lib/go-$v/bin/go" ] || want="$want $v"
done
[ -z "$want" ] && exit 0

. "$(dirname "$0")/apt-private.sh"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_private "$dir" \
	"deb [signed-by=$keyring] http://deb.debian.org/debian bookworm-backports main" \
	"deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" \
	"deb [signed-by=$keyring] http://deb.debian.org/debian trixie-backports main"
echo "go-toolchains: fetching Go$want from Debian"
apt_get update >/dev/null
for v in $want; do
	(cd "$apt_dir/debs" && apt_get download "golang-$v-go" "golang-$v-src" >/dev/null)
	for deb in "$apt_dir/debs/golang-$v-go_"*.deb "$apt_dir/debs/golang-$v-src_"*.deb; do
		dpkg-deb -x "$deb" "$dir"
	done
	rm -f "$apt_dir/debs/golang-$v-"*.deb
	"$dir/usr/lib/go-$v/bin/go" version
done
