#!/bin/sh
# SPDX-License-Identifier: MIT
# The tokio build matrix (docs/tokio.md): the test programs of tests/tokio
# (tokio-app, tokio-paths) built the ways users build theirs, each traced by
# tests/integration/test_tokio_matrix.py. Not a cross-product: between them
# the builds cover tokio's features (a small service's and full), opt-level
# 2, 3 and "s", codegen-units 1 and 16, no, thin and fat LTO, panic =
# "abort", debug 0 and 1, -C target-cpu=x86-64-v3, CET, and both compilers a
# Debian 12 user has: rustc 1.63 and rustc-web (scripts/rust-web.sh). The
# profiles are tests/tokio/Cargo.toml's. Three more builds of the matrix are
# the Makefile's own (release, fat-lto, cet: tokio-app and tokio-paths).
#
#   scripts/tokio-matrix.sh --list          the builds, a line each: NAME what
#   scripts/tokio-matrix.sh BUILD NAME...   each into BUILD/matrix/NAME/
set -eu

# NAME COMPILER FEATURES PROFILE RUSTFLAGS (- for none)
table() {
	cat <<'EOF'
small-o2-abort 1.63 small m-o2-cgu1-abort -
small-os-thin 1.63 small m-os-thin -
small-v3 1.63 small release -C_target-cpu=x86-64-v3
web-small 1.96 small release -
web-fat-abort 1.96 full m-fat-abort -
web-small-os 1.96 small m-os-cgu1 -
web-cet-v3 1.96 full m-o2 -Z_cf-protection=full_-C_target-cpu=x86-64-v3
EOF
}

if [ "${1:-}" = --list ]; then
	table | while read -r name rustc features profile flags; do
		[ "$flags" = - ] && flags= || flags=", RUSTFLAGS=\"$(echo "$flags" | tr _ ' ')\""
		echo "$name rustc $rustc, $features features, profile $profile$flags"
	done
	exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 BUILD NAME... | --list" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
top=$(cd "$(dirname "$0")/.." && pwd)

for want in "$@"; do
	line=$(table | awk -v n="$want" '$1 == n')
	[ -n "$line" ] || { echo "tokio-matrix: no build named $want" >&2; exit 2; }
	set -- $line
	name=$1 compiler=$2 features=$3 profile=$4 flags=$(echo "$5" | tr _ ' ')
	[ "$flags" = - ] && flags=
	if [ "$compiler" = 1.63 ]; then
		cargo=/usr/bin/cargo rustc=/usr/bin/rustc lib=
	else
		"$top/scripts/rust-web.sh" "$build/rust-web" >/dev/null
		cargo=$build/rust-web/usr/bin/cargo rustc=$build/rust-web/usr/bin/rustc
		lib=$build/rust-web/usr/lib/x86_64-linux-gnu
	fi
	# -Z flags with a stable compiler, as the CET build of the Makefile does
	case $flags in *-Z*) bootstrap=1 ;; *) bootstrap= ;; esac
	target=$build/cargo/matrix-$name
	echo "  CARGO    $build/matrix/$name ($compiler, $features, $profile${flags:+, $flags})"
	(cd "$top/tests/tokio" &&
		env ${lib:+LD_LIBRARY_PATH=$lib} ${bootstrap:+RUSTC_BOOTSTRAP=1} RUSTC="$rustc" \
			RUSTFLAGS="$flags" "$cargo" build --offline --locked --quiet \
			--profile "$profile" --no-default-features --features "$features" \
			--bin tokio-app --bin tokio-paths --target-dir "$target")
	mkdir -p "$build/matrix/$name"
	for bin in tokio-app tokio-paths; do
		cp "$target/$profile/$bin" "$build/matrix/$name/$bin"
	done
done
