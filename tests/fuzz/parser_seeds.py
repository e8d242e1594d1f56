#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds for the parser fuzzers, cut from real binaries (docs/testing.md).

    parser_seeds.py elf BINARY OUT REGEX [MAX]
                                              a small ELF file: BINARY's headers, notes and
                                              .dynsym, and MAX functions matching REGEX (with
                                              what they call, four deep) and their code
    parser_seeds.py code BINARY OUTDIR REGEX [MAX]
                                              placement: a function's address (8 bytes, little
                                              endian) and its code, one file each
    parser_seeds.py names BINARY OUTDIR [MAX] tokio_names: symbol lists, each raw::poll
                                              instance with its call tree
    parser_seeds.py edge OUTDIR               hand-made ELF files: probe notes at their limits,
                                              32-bit, big-endian
    parser_seeds.py edge-code OUTDIR          hand-made function starts (tests/unit/test_placement.c)
    parser_seeds.py edge-names OUTDIR         hand-made name lists: shared code, GenFuture, the
                                              worker loop

A real tokio binary is 5-17 MB; what the parsers read of it is its headers,
its symbols and a few functions' code, so that is what a seed keeps.
"""
import bisect
import os
import re
import struct
import subprocess
import sys

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE, SHT_DYNSYM = 1, 2, 3, 7, 11
SHF_ALLOC, SHF_EXECINSTR = 2, 4
STT_FUNC = 2
SHN_ABS = 0xfff1
MAX_CODE = 16384        # bytes of one function kept
MAX_ELF_CODE = 8192     # bytes of code in one cut ELF file (elf_image's -max_len is 64 KiB)
MAX_SEED = 60000        # bytes of one name list (the target's -max_len is 65536)


class Elf:
    """Just enough of a little-endian ELF64 file."""

    def __init__(self, path):
        self.data = d = open(path, "rb").read()
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
            raise SystemExit("%s: not a little-endian ELF64 file" % path)
        (self.type, self.machine, _, self.entry, self.phoff, shoff, self.flags, _,
         phentsize, self.phnum, shentsize, shnum, shstrndx) = struct.unpack_from(
            "<HHIQQQIHHHHHH", d, 16)
        self.phdrs = d[self.phoff:self.phoff + phentsize * self.phnum]
        self.secs = []
        for i in range(shnum):
            f = struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize)
            self.secs.append(dict(zip(("name", "type", "flags", "addr", "offset", "size",
                                       "link", "info", "align", "entsize"), f)))
        strs = self.secs[shstrndx]
        for s in self.secs:
            s["sname"] = self.cstr(strs["offset"] + s["name"])
        self.funcs = []     # (addr, size, name, info, other)
        for s in self.secs:
            if s["type"] != SHT_SYMTAB:
                continue
            names = self.secs[s["link"]]["offset"]
            for off in range(s["offset"] + 24, s["offset"] + s["size"], 24):
                name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", d, off)
                if info & 0xf == STT_FUNC and value and shndx:
                    self.funcs.append((value, size, self.cstr(names + name), info, other))
        self.funcs.sort()
        self.starts = [f[0] for f in self.funcs]

    def cstr(self, off):
        return self.data[off:self.data.index(b"\0", off)].decode("latin-1")

    def section(self, name):
        return next((s for s in self.secs if s["sname"] == name), None)

    def code(self, addr, size):
        for s in self.secs:
            if s["type"] == SHT_PROGBITS and s["addr"] <= addr and addr + size <= s["addr"] + s["size"]:
                off = s["offset"] + addr - s["addr"]
                return self.data[off:off + size]
        return None

    def aliases(self, addr):
        i = bisect.bisect_left(self.starts, addr)
        out = []
        while i < len(self.funcs) and self.funcs[i][0] == addr:
            out.append(self.funcs[i])
            i += 1
        return out

    def callees(self):
        """Direct calls and jumps out of each function, in code order: {addr: [addr]}."""
        out = {}
        dis = subprocess.run(["objdump", "-d", "-j", ".text", "--no-show-raw-insn", "-w",
                              self.path], capture_output=True, text=True, check=True).stdout
        insn = re.compile(r"^\s*([0-9a-f]+):\s+(call|jmp)\s+([0-9a-f]+) <")
        for line in dis.splitlines():
            m = insn.match(line)
            if not m:
                continue
            at, to = int(m.group(1), 16), int(m.group(3), 16)
            i = bisect.bisect_right(self.starts, at) - 1
            if i < 0:
                continue
            f = self.funcs[i][0]
            if to != f and self.aliases(to) and to not in out.setdefault(f, []):
                out[f].append(to)
        return out


def write_elf(path, sections, machine=62, cls=2, endian="<", etype=3, phdrs=b"", phnum=0):
    """sections: dicts of name, type, flags, addr, data, link, info, align, entsize."""
    big = cls == 2
    ehsize, shentsize = (64, 64) if big else (52, 40)
    shstr = b"\0"
    names = []
    for s in sections:
        names.append(len(shstr))
        shstr += s["name"].encode() + b"\0"
    names.append(len(shstr))
    shstr += b".shstrtab\0"
    sections = sections + [dict(name=".shstrtab", type=SHT_STRTAB, data=shstr)]
    body = bytearray(ehsize) + phdrs
    offs = []
    for s in sections:
        align = max(1, s.get("align", 1))
        body += b"\0" * (-len(body) % align)
        offs.append(len(body))
        body += s["data"]
    body += b"\0" * (-len(body) % 8)
    shoff = len(body)
    shfmt = endian + ("IIQQQQIIQQ" if big else "IIIIIIIIII")
    body += b"\0" * shentsize
    for s, name, off in zip(sections, names, offs):
        body += struct.pack(shfmt, name, s["type"], s.get("flags", 0), s.get("addr", 0), off,
                            len(s["data"]), s.get("link", 0), s.get("info", 0),
                            s.get("align", 1), s.get("entsize", 0))
    ident = b"\x7fELF" + bytes([cls, 1 if endian == "<" else 2, 1]) + b"\0" * 9
    hfmt = endian + ("16sHHIQQQIHHHHHH" if big else "16sHHIIIIIHHHHHH")
    struct.pack_into(hfmt, body, 0, ident, etype, machine, 1, 0, ehsize if phnum else 0, shoff,
                     0, ehsize, 56 if big else 32, phnum, shentsize, len(sections) + 1,
                     len(sections))
    with open(path, "wb") as f:
        f.write(body)


def cut_elf(binary, out, regex, most=8):
    """The code of up to most functions matching regex and of what they call, four deep
    (as deep as tokio's name search reads), and the symbols of what those call."""
    elf = Elf(binary)
    elf.path = binary
    calls = elf.callees()
    code, frontier = [], list(dict.fromkeys(f[0] for f in elf.funcs if re.search(regex, f[2])))
    frontier = frontier[:most]
    for _ in range(4):
        nxt = []
        for a in frontier:
            if a not in code:
                code.append(a)
                nxt += calls.get(a, [])[:8]
        frontier = nxt
    named = [a for a in dict.fromkeys(frontier) if a not in code]
    sections = []
    for s in elf.secs:
        if s["type"] == SHT_NOTE:
            sections.append(dict(name=s["sname"], type=SHT_NOTE, flags=s["flags"], addr=s["addr"],
                                 align=s["align"],
                                 data=elf.data[s["offset"]:s["offset"] + s["size"]]))
    dynsym, dynstr = elf.section(".dynsym"), elf.section(".dynstr")
    if dynsym and dynstr:
        sections.append(dict(name=".dynsym", type=SHT_DYNSYM, flags=SHF_ALLOC, addr=dynsym["addr"],
                             align=8, entsize=24, info=dynsym["info"], link=len(sections) + 2,
                             data=elf.data[dynsym["offset"]:dynsym["offset"] + dynsym["size"]]))
        sections.append(dict(name=".dynstr", type=SHT_STRTAB, flags=SHF_ALLOC, addr=dynstr["addr"],
                             data=elf.data[dynstr["offset"]:dynstr["offset"] + dynstr["size"]]))
    syms, strtab, code_bytes = [b"\0" * 24], b"\0", 0

    def add_syms(addr, shndx):
        nonlocal strtab
        for a, size, name, info, other in elf.aliases(addr)[:8]:
            syms.append(struct.pack("<IBBHQQ", len(strtab), info, other, shndx, a, size))
            strtab += name.encode("latin-1") + b"\0"

    for a in code:      # breadth first: what is nearest the functions wanted first
        size = elf.aliases(a)[0][1]
        body = elf.code(a, size)
        if not size or body is None or code_bytes + size > MAX_ELF_CODE:
            named.append(a)
            continue
        code_bytes += size
        sections.append(dict(name=".text", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_EXECINSTR,
                             addr=a, align=16, data=body))
        add_syms(a, len(sections))
    for a in sorted(set(named)):
        add_syms(a, SHN_ABS)    # a name, without its code
    sections.append(dict(name=".symtab", type=SHT_SYMTAB, align=8, entsize=24, info=1,
                         link=len(sections) + 2, data=b"".join(syms)))
    sections.append(dict(name=".strtab", type=SHT_STRTAB, data=strtab))
    write_elf(out, sections, machine=elf.machine, etype=elf.type, phdrs=elf.phdrs,
              phnum=elf.phnum)
    print("%s: %d symbols, %d bytes" % (out, len(syms) - 1, os.path.getsize(out)))


def cut_code(binary, outdir, regex, most=16):
    elf = Elf(binary)
    os.makedirs(outdir, exist_ok=True)
    seen, n = set(), 0
    for addr, size, name, _, _ in elf.funcs:
        if n >= most or addr in seen or not size or not re.search(regex, name):
            continue
        code = elf.code(addr, min(size, MAX_CODE))
        if code is None:
            continue
        seen.add(addr)
        with open(os.path.join(outdir, "%s-%x" % (os.path.basename(binary), addr)), "wb") as f:
            f.write(struct.pack("<Q", addr) + code)
        n += 1
    print("%s: %d functions from %s" % (outdir, n, binary))


def is_poll_layer(name):
    """What tokio's name search looks inside (src/targets/tokio/tokio.c), told from the mangled name."""
    return "5tokio7runtime4task" in name and re.search(r"\d(poll|poll_future|poll_inner)\d", name)


def name_lists(binary, outdir, most=8):
    """Each raw::poll instance and its call tree, as far as the name search goes: one
    line a function, indented by its depth, its other symbols after it as '=' lines."""
    elf = Elf(binary)
    elf.path = binary
    calls = elf.callees()
    os.makedirs(outdir, exist_ok=True)
    base = os.path.basename(binary)

    def tree(addr, depth, seen):
        al = elf.aliases(addr)
        pad = " " * depth
        out = [pad + al[0][2]] + [pad + "=" + f[2] for f in al[1:8]]
        if depth > 3 or (depth and not is_poll_layer(al[0][2])):
            return out
        for c in calls.get(addr, [])[:8]:
            if c not in seen:
                seen.add(c)
                out += tree(c, depth + 1, seen)
        return out

    polls = sorted({f[0] for f in elf.funcs if re.search(r"5tokio7runtime4task3raw4poll", f[2])})
    groups = [tree(a, 0, {a}) for a in polls]
    for i, g in enumerate(groups[:most]):
        with open(os.path.join(outdir, "%s-poll-%d" % (base, i)), "w", encoding="latin-1") as f:
            f.write("\n".join(g) + "\n")
    # every function tokio's classification looks at, the polls with their trees first
    out, size = [], 0
    rest = [f[2] for f in elf.funcs if "5tokio7runtime" in f[2]]
    for l in [l for g in groups for l in g] + rest:
        if size + len(l) + 1 > MAX_SEED:
            break
        out.append(l)
        size += len(l) + 1
    with open(os.path.join(outdir, "%s-all" % base), "w", encoding="latin-1") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d poll trees and a list of %d names from %s" %
          (outdir, min(most, len(groups)), len(out), binary))


def note(name, desc, ntype=3, endian="<"):
    pad = lambda b: b + b"\0" * (-len(b) % 4)
    return struct.pack(endian + "III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def stapsdt(pc, sem, provider, probe, args, cls=2, endian="<"):
    addr = endian + ("QQQ" if cls == 2 else "III")
    return note(b"stapsdt\0", struct.pack(addr, pc, 0, sem) + provider + b"\0" + probe + b"\0" +
                args + b"\0", endian=endian)


def edge(outdir):
    os.makedirs(outdir, exist_ok=True)
    text = dict(name=".text", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_EXECINSTR, addr=0x1000,
                align=16, data=b"\x90" * 64)

    def notes(*ns):
        return dict(name=".note.stapsdt", type=SHT_NOTE, align=4, data=b"".join(ns))

    cases = {
        # at the limits: a 63-byte provider fits, 64 does not; 255 bytes of arguments are
        # kept, 256 make the spec unknown
        "notes-limits": [notes(stapsdt(0x1000, 0, b"p" * 63, b"n" * 63, b"8@%rdi"),
                               stapsdt(0x1004, 0, b"p" * 64, b"n", b""),
                               stapsdt(0x1008, 0, b"asynctrace", b"wake", b"8@%rdi " * 35 + b"-8@$123456"),
                               stapsdt(0x100c, 0, b"asynctrace", b"wake", b"8@%rdi " * 35 + b"-8@$1234567"),
                               stapsdt(0x1010, 0x2000, b"asynctrace", b"poll_end", b""))],
        # damaged notes: another type, a short name, a cut descriptor
        "notes-damaged": [notes(note(b"stapsdt\0", b"\0" * 24 + b"a\0b\0c\0", ntype=4),
                                note(b"stapsd\0", b"\0" * 24 + b"a\0b\0c\0"),
                                note(b"stapsdt\0", b"\0" * 25),
                                note(b"stapsdt\0", b"\0" * 24 + b"a\0b\0c"),
                                stapsdt(0x1000, 0, b"asynctrace", b"steal", b"-4@$-1"))],
    }
    for name, secs in cases.items():
        write_elf(os.path.join(outdir, name), [text] + secs)
    # 32-bit and big-endian files: other address sizes, and libelf converting byte order
    write_elf(os.path.join(outdir, "notes-elf32"),
              [text, notes(stapsdt(0x1000, 0x3000, b"asynctrace", b"poll_begin",
                                   b"4@%eax 4@-8(%ebp)", cls=1))], machine=3, cls=1)
    be = dict(notes(stapsdt(0x1000, 0, b"asynctrace", b"wake", b"8@%rdi", endian=">")))
    write_elf(os.path.join(outdir, "notes-big-endian"), [text, be], machine=43, endian=">")
    print("%s: hand-made ELF files" % outdir)


def edge_code(outdir):
    """Function starts as tests/unit/test_placement.c assembles them, at 0x1000, and one
    at the top of the address space, where a branch inside it wraps around."""
    os.makedirs(outdir, exist_ok=True)
    endbr64, push_rbx, ret = b"\xf3\x0f\x1e\xfa", b"\x53", b"\xc3"
    cases = {
        "code-endbr64-push": (0x1000, endbr64 + push_rbx + ret),
        "code-harmless-moves": (0x1000, endbr64 + b"\x31\xc0\x48\x85\xff\x75\x02" + ret * 3),
        "code-argument-written": (0x1000, endbr64 + b"\x48\x89\xf7" + push_rbx + ret),
        "code-stores": (0x1000, endbr64 + b"\x0f\x11\x07\xeb\x00" + ret),
        "code-branch-into-prefix": (0x1000, endbr64 + b"\x48\x8b\x07" + push_rbx + b"\xeb\xfa" + ret),
        "code-top-of-memory": ((1 << 64) - 4, endbr64 + b"\x48\x8b\x07" + push_rbx + b"\xeb\xfa" + ret),
        "code-empty": (0x1000, b""),
    }
    for name, (addr, code) in cases.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(struct.pack("<Q", addr) + code)
    print("%s: hand-made function starts" % outdir)


def legacy(*path, h=1):
    """A legacy-mangled Rust symbol: each part spelled with its length, then a hash."""
    # a hash of varied digits: libiberty takes a symbol for Rust only then
    return "_ZN" + "".join("%d%s" % (len(p), p) for p in path) + "17h%016xE" % (
        h * 0x9e3779b97f4a7c15 & (1 << 64) - 1)


def edge_names(outdir):
    os.makedirs(outdir, exist_ok=True)
    poll = legacy("tokio", "runtime", "task", "raw", "poll")
    stage = lambda t, h: legacy("core", "ptr", "drop_in_place$LT$tokio..runtime..task..core..Stage"
                                "$LT$%s$GT$$GT$" % t, h=h)
    cases = {
        # one body, two futures' drop glue (identical code folding): named by neither
        "names-ambiguous": [poll, " " + stage("app..A", 2), " =" + stage("app..B", 3)],
        # GenFuture wrapped twice, and a fn type whose "->" is no bracket
        "names-genfuture": [poll, " " + stage("core..future..from_generator..GenFuture$LT$core.."
                                              "future..from_generator..GenFuture$LT$app..f..$u7b$"
                                              "$u7b$closure$u7d$$u7d$$GT$$GT$", 2),
                            legacy("tokio", "runtime", "task", "waker", "wake_by_val", h=4),
                            legacy("tokio", "runtime", "task", "raw", "schedule", h=5)],
        "names-fn-type": [poll, " " + stage("app..W$LT$fn$LP$$RP$$u20$.$GT$$u20$u8$GT$", 2)],
        # the worker loop, reached three calls deep; an LTO suffix
        "names-worker-loop": [poll + ".llvm.123",
                              " " + legacy("tokio", "runtime", "task", "harness",
                                           "Harness$LT$T$C$S$GT$", "poll", h=6),
                              "  " + legacy("tokio", "runtime", "task", "harness", "poll_future",
                                            h=7),
                              "   " + legacy("tokio", "runtime", "scheduler", "multi_thread",
                                             "worker", "run", h=8),
                              legacy("tokio", "runtime", "task", "raw", "poll", h=9),
                              " " + stage("app..C", 10)],
    }
    for name, lines in cases.items():
        with open(os.path.join(outdir, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    print("%s: hand-made name lists" % outdir)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "elf":
        cut_elf(args[0], args[1], args[2], *(int(a) for a in args[3:]))
    elif cmd == "code":
        cut_code(args[0], args[1], args[2], *(int(a) for a in args[3:]))
    elif cmd == "names":
        name_lists(args[0], args[1], *(int(a) for a in args[2:]))
    elif cmd == "edge":
        edge(args[0])
    elif cmd == "edge-names":
        edge_names(args[0])
    elif cmd == "edge-code":
        edge_code(args[0])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
