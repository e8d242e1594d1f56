#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerate the vendored vmlinux.h from a kernel's BTF.
#   vmlinux/gen-vmlinux.sh [BTF_FILE] [ARCH]
# BTF_FILE defaults to the running kernel's /sys/kernel/btf/vmlinux; ARCH to
# the machine's (x86, arm64, ...). CO-RE relocations make the result usable on
# other kernels: it only has to contain the types the BPF code names.
set -eu
btf=${1:-/sys/kernel/btf/vmlinux}
arch=${2:-$(uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')}
dir=$(dirname "$0")/$arch
mkdir -p "$dir"
bpftool btf dump file "$btf" format c > "$dir/vmlinux.h.tmp"
mv "$dir/vmlinux.h.tmp" "$dir/vmlinux.h"
echo "wrote $dir/vmlinux.h from $btf"
