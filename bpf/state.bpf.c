// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The one definition of the state every unit shares: the maps, the loader's
 * settings and the globals the headers declare (AT_SHARED), the global
 * function that claims a worker's slot, and the object's license. No
 * program: the others are linked to this (bpftool gen object).
 */
#define AT_STATE_HERE
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "switch.bpf.h"
#include "usdt_args.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";
