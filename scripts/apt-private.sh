# SPDX-License-Identifier: MIT
# Sourced by the scripts that fetch toolchains without installing them
# (go-toolchains.sh, rust-web.sh). apt_private DIR LINE... writes the
# sources.list LINEs under DIR/apt and readies apt_get: apt-get with package
# lists of its own there, downloading there, never taking the host's apt lock
# nor its state. Runs as root or not: no sandbox user.

apt_private() {
	apt_dir=$1/apt
	shift
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
	printf '%s\n' "$@" >"$apt_dir/sources.list"
}

apt_get() {
	apt-get -q -o Dir::Etc::SourceList="$apt_dir/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$apt_dir/lists" \
		-o Dir::Cache="$apt_dir/cache" -o Debug::NoLocking=1 \
		-o APT::Sandbox::User="$(id -un)" "$@"
}
