#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetches Debian 12's newer Rust toolchain, rustc-web and cargo-web (from
# bookworm-security, beside bookworm's default rustc 1.63), for the tokio
# build matrix (docs/tokio.md, docs/testing.md). The two cannot be installed
# together (rustc-web replaces rustc), so nothing is installed: apt-get reads
# its own lists under DIR and only downloads, with the libraries the
# toolchain needs (its standard library, LLVM), found from each package's
# Depends; dpkg-deb unpacks them all under DIR. Run it with
# LD_LIBRARY_PATH=DIR/usr/lib/x86_64-linux-gnu (rustc finds its standard
# library from where it is). Idempotent: a toolchain already there is kept.
#
#   scripts/rust-web.sh DIR
set -eu

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$(mkdir -p "$1" && cd "$1" && pwd)
[ -x "$dir/usr/bin/rustc" ] && [ -x "$dir/usr/bin/cargo" ] && exit 0

. "$(dirname "$0")/apt-private.sh"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_private "$dir" \
	"deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main" \
	"deb [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main"
echo "rust-web: fetching rustc-web and cargo-web from Debian"
apt_get update >/dev/null
want="rustc-web cargo-web libstd-rust-web-dev"
got=
while [ -n "$want" ]; do
	(cd "$apt_dir/debs" && apt_get download $want >/dev/null)
	got="$got $want"
	# what they need that the host's rustc does not bring: the versioned std, LLVM
	want=
	for deb in "$apt_dir/debs"/*.deb; do
		for dep in $(dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' | sed 's/^ *//; s/[ (].*//' |
			     grep -E '^(libstd-rust-web|libllvm)[0-9.-]*' || true); do
			case " $got $want " in *" $dep "*) ;; *) want="$want $dep" ;; esac
		done
	done
done
for deb in "$apt_dir/debs"/*.deb; do
	dpkg-deb -x "$deb" "$dir"
done
rm -f "$apt_dir/debs"/*.deb
LD_LIBRARY_PATH="$dir/usr/lib/x86_64-linux-gnu" "$dir/usr/bin/rustc" --version
