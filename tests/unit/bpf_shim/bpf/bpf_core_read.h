/* SPDX-License-Identifier: MIT */
/* CO-RE reads of the shim's kernel types: plain loads. */
#ifndef SHIM_BPF_CORE_READ_H
#define SHIM_BPF_CORE_READ_H

#define BPF_CORE_READ(src, field) ((src)->field)
#define bpf_core_field_exists(field) 1

#endif
