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
    parser_seeds.py go BINARY OUT [dwarf]     golang: a Go binary cut to what golang.c reads
                                              (with dwarf: runtime.g, m and p in a small DWARF)
    parser_seeds.py edge-go OUTDIR            golang: hand-made Go binaries at the edges
    parser_seeds.py edge-tls OUTDIR           elf_image: a small static program with tokio's
                                              CONTEXT thread-local and code that writes it
                                              (sample mode's reader, tokio_current.c)
    parser_seeds.py dwarf BINARY OUT          func_index: BINARY's headers and DWARF, whole
                                              compile units to MAX_SEED bytes
    parser_seeds.py edge-dwarf OUTDIR         func_index: C++ and Rust programs compiled here
                                              (namespaces, inlined calls), cut the same way
    parser_seeds.py proc OUTDIR PID...        proc: the maps, stat and cgroup files of PIDs,
                                              and hand-made ones
    parser_seeds.py kallsyms OUTDIR           ksyms: cuts of /proc/kallsyms, addresses moved to
                                              where a kernel without KASLR has them

A real tokio binary is 5-17 MB; what the parsers read of it is its headers,
its symbols and a few functions' code, so that is what a seed keeps. A Go
binary is 2-26 MB: golang.c reads its headers, .go.buildinfo, .symtab or
.gopclntab, runtime.waitReasonStrings in .data and the strings in .rodata
it points to, and the code of the probed functions and of goroutine
wrappers; a seed keeps those, the tables rewritten down to the functions
that matter (and the one after each, whose start ends it).
"""
import bisect
import os
import re
import struct
import subprocess
import sys
import tempfile

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
    """sections: dicts of name, type, flags, addr, data, link, info, align, entsize (and
    size, for SHT_NOBITS: data is then empty)."""
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
                            s.get("size", len(s["data"])), s.get("link", 0), s.get("info", 0),
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


GO_FUNCS = ("runtime.execute", "runtime.casgstatus", "runtime.ready", "runtime.runqsteal",
            "runtime.newproc1")
GO_FIRST_WAIT = b"GC assist marking"    # runtime.waitReasonStrings[1], since Go 1.11
MAX_GO_FUNCS = 96       # functions a Go seed names
MAX_GO_CODE = 16384     # bytes of code in one (golang's -max_len is 64 KiB)
SHF_WRITE = 1


def go_pclntab_section(elf):
    """.gopclntab; a PIE build's is .data.rel.ro.gopclntab (which golang.c does not read)"""
    return elf.section(".gopclntab") or elf.section(".data.rel.ro.gopclntab")


def go_functions(elf):
    """(addr, size, name) of every function, as golang.c finds them: from .symtab, or else
    from .gopclntab; and .gopclntab's header (magic, the textStart it says)."""
    t = go_pclntab_section(elf)
    d = elf.data[t["offset"]:t["offset"] + t["size"]]
    magic, = struct.unpack_from("<I", d, 0)
    nfunc, _, text, names, _, _, _, functab = struct.unpack_from("<8Q", d, 8)
    header = (magic, text)
    if elf.section(".symtab"):
        return [(a, size, name) for a, size, name, _, _ in elf.funcs], header
    text = text or elf.section(".text")["addr"]
    out = []
    for i in range(nfunc):
        entry, off, nxt = struct.unpack_from("<III", d, functab + i * 8)
        fentry, name = struct.unpack_from("<Ii", d, functab + off)
        out.append((text + fentry, nxt - entry if nxt > entry else 0,
                    d[names + name:d.index(b"\0", names + name)].decode("latin-1")))
    return sorted(out), header


def go_wait_reasons(elf):
    """runtime.waitReasonStrings as golang.c finds it: (its address, [its names])."""
    ro, data = elf.section(".rodata"), elf.section(".data")
    rod = elf.data[ro["offset"]:ro["offset"] + ro["size"]]
    dd = elf.data[data["offset"]:data["offset"] + data["size"]]
    at = rod.find(GO_FIRST_WAIT)
    while at >= 0:
        addr = ro["addr"] + at
        for w in range(16, len(dd) - 15, 8):
            if struct.unpack_from("<QQQ", dd, w - 8) != (0, addr, len(GO_FIRST_WAIT)):
                continue
            names = [b""]
            for r in range(1, 256):
                if w - 16 + 16 * (r + 1) > len(dd):
                    break
                p, n = struct.unpack_from("<QQ", dd, w - 16 + 16 * r)
                if not 0 < n < 64 or not ro["addr"] <= p <= ro["addr"] + len(rod) - n:
                    break
                names.append(rod[p - ro["addr"]:p - ro["addr"] + n])
            return data["addr"] + w - 16, names
        at = rod.find(GO_FIRST_WAIT, at + 1)
    return None, []


def go_dwarf():
    """.debug_* sections of a C program whose structures are named and laid out as Go
    1.27's runtime.g, m and p (the fields golang.c reads, at their offsets): compiled
    here with cc, its names' '_' made '.'; None without cc."""
    fields = {"g": [("m", 48), ("atomicstatus", 144), ("goid", 152), ("waitreason", 176),
                    ("preempt", 177), ("startpc", 304)],
              "m": [("curg", 184), ("p", 208)],
              "p": [("id", 0), ("runqhead", 400), ("runqtail", 404)]}
    src = ""
    for t, fs in fields.items():
        src += "struct runtime_%s {\n" % t
        at = 0
        for i, (name, off) in enumerate(fs):
            if off > at:
                src += "\tchar pad%d[%d];\n" % (i, off - at)
            size = 8 if name in ("m", "goid", "startpc", "curg", "p") else 4 if name in (
                "atomicstatus", "id", "runqhead", "runqtail") else 1
            src += "\t%s %s;\n" % ({8: "long", 4: "int", 1: "char"}[size], name)
            at = off + size
        src += "\tchar end[8];\n} %s_;\n" % t
    src += "int main(void) { return 0; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "g.c"), os.path.join(tmp, "g")
        open(c, "w").write(src)
        try:
            subprocess.run(["cc", "-g", "-gdwarf-4", "-O0", c, "-o", exe], check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        elf = Elf(exe)
        out = []
        for s in elf.secs:
            if s["sname"] in (".debug_info", ".debug_abbrev", ".debug_str"):
                d = elf.data[s["offset"]:s["offset"] + s["size"]]
                for t in fields:
                    d = d.replace(b"runtime_%s\0" % t.encode(), b"runtime.%s\0" % t.encode())
                out.append(dict(name=s["sname"], type=SHT_PROGBITS, data=d))
        return out


def go_pclntab(funcs, header, text_addr):
    """A .gopclntab of funcs ((addr, name), sorted) in golang.c's layout: the header,
    the names, nfunc (entry, _func offset) pairs and the end, each _func's entry and
    name. textStart as the binary says it (0 from Go 1.26: .text's address)."""
    magic, text = header
    base = text or text_addr
    names, name_off = b"", []
    for _, name in funcs:
        name_off.append(len(names))
        names += name.encode("latin-1") + b"\0"
    names += b"\0" * (-len(names) % 8)
    nfunc, functab = len(funcs) - 1, 72 + len(names)
    pairs, recs = b"", b""
    for i, (addr, _) in enumerate(funcs):
        pairs += struct.pack("<II", addr - base, 8 * (nfunc + 1) + len(recs))
        recs += struct.pack("<Ii", addr - base, name_off[i])
    head = struct.pack("<IBBBB8Q", magic, 0, 0, 1, 8, nfunc, 0, text, 72, 0, 0, 0, functab)
    return head + names + pairs[:8 * nfunc] + pairs[8 * nfunc:] + recs


def cut_go(binary, out, dwarf=False):
    """binary cut to what golang.c reads (see the docstring at the top)."""
    elf = Elf(binary)
    funcs, header = go_functions(elf)
    text = elf.section(".text")
    starts = sorted({a for a, _, _ in funcs})
    want = [f for f in funcs if f[2] in GO_FUNCS]
    want += [f for f in funcs if f[2].startswith("runtime.morestack") or f[2].startswith("main.")]
    want = want[:MAX_GO_FUNCS // 2]
    # each one's successor, whose start ends it in .gopclntab
    keep = {a: n for a, _, n in want}
    by_addr = {a: n for a, _, n in reversed(funcs)}
    for a, _, _ in want:
        i = bisect.bisect_right(starts, a)
        if i < len(starts) and starts[i] not in keep:
            keep[starts[i]] = by_addr[starts[i]]
    sections = [dict(name=".text", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_EXECINSTR,
                     addr=text["addr"], align=16, data=elf.code(text["addr"], 16))]
    code = 0
    for a, size, name in want:
        body = elf.code(a, size) if size else None
        wrapper = name in GO_FUNCS or re.search(r"\.(func|gowrap)\d+$", name)
        if a == text["addr"] or not body or not wrapper or code + size > MAX_GO_CODE:
            continue
        code += size
        sections.append(dict(name=".text", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_EXECINSTR,
                             addr=a, align=16, data=body))
    # the wait reasons, their strings packed at the start of .rodata
    array, reasons = go_wait_reasons(elf)
    ro = elf.section(".rodata")
    if array:
        strs, entries = b"", [(0, 0)]
        for r in reasons[1:]:
            entries.append((ro["addr"] + len(strs), len(r)))
            strs += r
        sections.append(dict(name=".rodata", type=SHT_PROGBITS, flags=SHF_ALLOC, addr=ro["addr"],
                             align=32, data=strs))
        sections.append(dict(name=".data", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_WRITE,
                             addr=array, align=32,
                             data=b"".join(struct.pack("<QQ", *e) for e in entries) + b"\0" * 16))
    table = sorted(keep.items())
    pcln = go_pclntab_section(elf)
    sections.append(dict(name=pcln["sname"], type=SHT_PROGBITS, flags=SHF_ALLOC, addr=pcln["addr"],
                         align=8, data=go_pclntab(table, header, text["addr"])))
    bi = elf.section(".go.buildinfo")
    sections.append(dict(name=".go.buildinfo", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_WRITE,
                         addr=bi["addr"], align=16,
                         data=elf.data[bi["offset"]:bi["offset"] + bi["size"]]))
    if elf.section(".symtab"):
        syms, strtab = [b"\0" * 24], b"\0"
        for a, size, name in funcs:
            if a in keep and name == keep[a]:
                syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 1, a, size))
                strtab += name.encode("latin-1") + b"\0"
        sections.append(dict(name=".symtab", type=SHT_SYMTAB, align=8, entsize=24, info=1,
                             link=len(sections) + 2, data=b"".join(syms)))
        sections.append(dict(name=".strtab", type=SHT_STRTAB, data=strtab))
    if dwarf:
        sections += go_dwarf() or []
    write_elf(out, sections, machine=elf.machine, etype=elf.type, phdrs=elf.phdrs, phnum=elf.phnum)
    print("%s: %d functions, %d bytes of code, %d wait reasons, %d bytes" %
          (out, len(keep), code, len(reasons), os.path.getsize(out)))


def go_buildinfo(version, flags=2, addr=0):
    """.go.buildinfo: the version inline (flags 2, Go 1.18 on) or at addr (before)."""
    head = b"\xff Go buildinf:" + bytes([8, flags])
    if flags & 2:
        return head + b"\0" * 16 + bytes([len(version)]) + version
    return head + struct.pack("<QQ", addr, 0)


def edge_go(outdir):
    """Hand-made Go binaries: the version as Go 1.17 and older gave it (the address of a
    string header), at the top of memory where addr + 16 and addr + len wrapped past the
    checks (the bug issue 29 names); a .strtab with no final NUL, names shared by every
    symbol, the first wait reason in .rodata many times over (what was quadratic)."""
    os.makedirs(outdir, exist_ok=True)
    top = (1 << 64) - 8
    data = lambda addr, payload: dict(name=".data", type=SHT_PROGBITS, flags=SHF_ALLOC | SHF_WRITE,
                                      addr=addr, align=8, data=payload)
    rodata = lambda addr, payload: dict(name=".rodata", type=SHT_PROGBITS, flags=SHF_ALLOC,
                                        addr=addr, data=payload)
    bi = lambda payload: dict(name=".go.buildinfo", type=SHT_PROGBITS, flags=SHF_ALLOC,
                              addr=0x5000, align=16, data=payload)
    sym = lambda name_off, addr, n=1: b"\0" * 24 + b"".join(
        struct.pack("<IBBHQQ", name_off, 0x12, 0, 1, addr + 16 * i, 16) for i in range(n))
    symtab = lambda syms, strs, at: [
        dict(name=".symtab", type=SHT_SYMTAB, align=8, entsize=24, info=1, link=at + 2, data=syms),
        dict(name=".strtab", type=SHT_STRTAB, data=strs)]
    cases = {
        # a string header in .data at 0x1000, the version in .rodata
        "go-1.17": [bi(go_buildinfo(b"", 0, 0x1000)), data(0x1000, struct.pack("<QQ", 0x2000, 8)),
                    rodata(0x2000, b"go1.17.9")],
        # the header's address at the top of memory: addr + 16 wrapped to 8, under .data's end
        "go-1.17-header-wraps": [bi(go_buildinfo(b"", 0, top)),
                                 data(0x1000, struct.pack("<QQ", 0x2000, 8) * 256)],
        # the version's: addr + len wrapped to 2
        "go-1.17-version-wraps": [bi(go_buildinfo(b"", 0, 0x1000)),
                                  data(0x1000, struct.pack("<QQ", top, 10)),
                                  rodata(0x2000, b"go1.17.9" * 64)],
        # every symbol named by one string the table never ends
        "go-strtab-unended": [bi(go_buildinfo(b"go1.22.1"))] + symtab(sym(1, 0x401000, 64),
                                                                      b"\0" + b"a" * 4096, 1),
        # every symbol named by one long string
        "go-name-shared": [bi(go_buildinfo(b"go1.22.1"))] + symtab(
            sym(1, 0x401000, 64), b"\0" + b"runtime.execute" * 256 + b"\0", 1),
        # the first wait reason 512 times over, and no array
        "go-wait-reasons-many": [bi(go_buildinfo(b"go1.22.1")), rodata(0x2000, GO_FIRST_WAIT * 512),
                                 data(0x8000, b"\1" * 8192)] + symtab(sym(1, 0x401000),
                                                                      b"\0main.main\0", 3),
        # a varint that runs on past the section
        "go-varint-unended": [bi(b"\xff Go buildinf:\x08\x02" + b"\0" * 16 + b"\xff" * 16)],
    }
    for name, secs in cases.items():
        write_elf(os.path.join(outdir, name), secs, etype=2)
    print("%s: hand-made Go binaries" % outdir)


DWARF_KEEP = (".debug_abbrev", ".debug_str", ".debug_line_str", ".debug_line", ".debug_rnglists",
              ".debug_ranges", ".debug_addr", ".debug_str_offsets")
MAX_DWARF = 60000       # bytes of one func_index seed (its -max_len is 64 KiB)


def units(data):
    """The units of a .debug_info: (offset, length with its header)."""
    at, out = 0, []
    while at + 4 <= len(data):
        n, = struct.unpack_from("<I", data, at)
        head = 4
        if n == 0xffffffff:
            n, = struct.unpack_from("<Q", data, at + 4)
            head = 12
        if not n or at + head + n > len(data):
            break
        out.append((at, head + n))
        at += head + n
    return out


def cut_dwarf(binary, out):
    """binary's ELF and program headers, its DWARF but .debug_info down to whole compile
    units, the smallest first, as many as fit MAX_DWARF (each unit stands alone: its
    DIEs' references are from its own start; the other sections stay whole, as a unit
    names places in them by absolute offsets). No code: the index reads none."""
    elf = Elf(binary)
    sections, size = [], 64 + len(elf.phdrs) + 64 * 16
    for s in elf.secs:
        if s["sname"] in DWARF_KEEP and not s["flags"] & 0x800:     # not SHF_COMPRESSED
            sections.append(dict(name=s["sname"], type=SHT_PROGBITS,
                                 data=elf.data[s["offset"]:s["offset"] + s["size"]]))
            size += s["size"]
    info = elf.section(".debug_info")
    if not info or size >= MAX_DWARF:
        print("%s: no DWARF that fits in %d bytes" % (binary, MAX_DWARF))
        return
    data = elf.data[info["offset"]:info["offset"] + info["size"]]
    kept = b""
    for at, n in sorted(units(data), key=lambda u: u[1]):
        if size + len(kept) + n <= MAX_DWARF:
            kept += data[at:at + n]
    sections.insert(0, dict(name=".debug_info", type=SHT_PROGBITS, data=kept))
    write_elf(out, sections, machine=elf.machine, etype=elf.type, phdrs=elf.phdrs,
              phnum=elf.phnum)
    print("%s: %d of %d bytes of compile units, %d bytes" % (out, len(kept), len(data),
                                                           os.path.getsize(out)))


EDGE_CXX = r"""
namespace outer { namespace inner {
struct Counter { int n; __attribute__((noinline)) int bump(int by); };
static inline int twice(int x) { return x * 2; }
int Counter::bump(int by) { for (int i = 0; i < by; i++) { int t = twice(i); n += t; } return n; }
} }
template <typename T> static inline T add(T a, T b) { return a + b; }
int main(int argc, char **) { outer::inner::Counter c{argc}; return add(c.bump(argc), 1); }
"""
EDGE_RUST = r"""
#![no_std]
mod outer {
    pub mod inner {
        #[inline(always)]
        fn twice(x: u64) -> u64 { x.wrapping_mul(2) }
        #[inline(never)]
        pub fn bump(n: u64) -> u64 { (0..n).map(twice).fold(0, u64::wrapping_add) }
    }
}
#[no_mangle]
pub extern "C" fn rs_bump(n: u64) -> u64 { outer::inner::bump(n) }
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! { loop {} }
"""
EDGE_RUST_MAIN = "unsigned long rs_bump(unsigned long);\n" \
                 "int main(int c, char **v) { return (int)rs_bump((unsigned long)c); }\n"


def nested_namespaces(path, depth):
    """An ELF file whose DWARF is one compile unit of depth namespaces, one inside the
    other, a function at the bottom: 2 bytes a level (the index's recursion stops at
    64; it had no bound, a stack frame a level)."""
    abbrev = bytes([1, 0x11, 1, 0, 0,                       # compile_unit, children
                    2, 0x39, 1, 0, 0,                       # namespace, children
                    3, 0x2e, 0, 0x11, 0x01, 0x12, 0x06, 0, 0,   # subprogram: low_pc, high_pc
                    0])
    dies = bytes([1]) + bytes([2]) * depth + bytes([3]) + struct.pack("<QI", 0x401000, 16) + \
        bytes(depth) + bytes(1)
    info = struct.pack("<IHIB", 2 + 4 + 1 + len(dies), 4, 0, 8) + dies
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0x400000, 0x2000, 0x2000, 0x1000)
    write_elf(path, [dict(name=".debug_abbrev", type=SHT_PROGBITS, data=abbrev),
                     dict(name=".debug_info", type=SHT_PROGBITS, data=info)],
              etype=2, phdrs=load, phnum=1)


def edge_dwarf(outdir):
    """A C++ program (namespaces, a method, a template and a loop inlined) compiled
    here with g++ -O2 -g, as DWARF 5 and 4; and Rust (modules in modules, iterator
    adapters inlined ten deep) by Debian's rustc -O -g, no_std so that std's DWARF (MBs)
    stays out, linked by cc. Each cut as cut_dwarf does; a compiler missing: skipped."""
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        def t(name, text=None):
            """a path in tmp, written with text if given"""
            path = os.path.join(tmp, name)
            if text is not None:
                with open(path, "w") as f:
                    f.write(text)
            return path

        cxx, rs, main = t("p.cc", EDGE_CXX), t("r.rs", EDGE_RUST), t("m.c", EDGE_RUST_MAIN)
        builds = [("cxx-dwarf5", [["g++", "-O2", "-g", cxx, "-o", t("cxx-dwarf5")]]),
                  ("cxx-dwarf4", [["g++", "-O2", "-gdwarf-4", cxx, "-o", t("cxx-dwarf4")]]),
                  ("rust", [["/usr/bin/rustc", "-O", "-g", "-C", "panic=abort", "--crate-type=lib",
                             "--emit=obj", rs, "-o", t("r.o")],
                            ["cc", "-g", main, t("r.o"), "-o", t("rust")]])]
        for name, cmds in builds:
            try:
                for cmd in cmds:
                    subprocess.run(cmd, check=True, capture_output=True)
            except (OSError, subprocess.CalledProcessError) as e:
                print("%s: not built (%s)" % (name, e))
                continue
            cut_dwarf(t(name), os.path.join(outdir, name))
    nested_namespaces(os.path.join(outdir, "namespaces-30000-deep"), 30000)
    nested_namespaces(os.path.join(outdir, "namespaces-60-deep"), 60)


def proc_files(outdir, pids):
    """/proc/PID/maps, stat and cgroup of each pid (processes of our own: their paths
    are in the seeds), and hand-made lines: a deleted file, spaces and parentheses in
    names, anonymous and special mappings, a name full of ')' in stat, cgroup v1."""
    os.makedirs(outdir, exist_ok=True)
    for pid in pids:
        comm = open("/proc/%s/comm" % pid).read().strip().replace("/", "_")
        for f in ("maps", "stat", "cgroup"):
            data = open("/proc/%s/%s" % (pid, f), "rb").read()[:16384]
            data = data[:data.rfind(b"\n") + 1] if len(data) == 16384 else data
            with open(os.path.join(outdir, "%s-%s" % (comm, f)), "wb") as out:
                out.write(data)
    cases = {
        "maps-edges": b"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234 /usr/bin/prog\n"
                      b"55d0c0a02000-55d0c0a09000 r-xp 00002000 fd:01 1234 /usr/bin/prog\n"
                      b"7f1000000000-7f1000001000 r-xp 00001000 fd:01 99 /tmp/a b (c).so (deleted)\n"
                      b"7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n"
                      b"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
                      b"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n"
                      b"7f2000000000-7f2000001000 r 0 fd:01 7 /short-perms\n"
                      b"7f3000000000-7f3000001000 r-xp 00000000 fd:01 8 /" + b"p" * 4200 + b"\n",
        "stat-parens": b"4242 (a) S 1 (b)) R 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0\n",
        "stat-cut": b"4242 (never closed S 17",
        "cgroup-v1-and-v2": b"12:pids:/user.slice\n1:name=systemd:/x\n0::/system.slice/a.service\n",
    }
    for name, data in cases.items():
        with open(os.path.join(outdir, name), "wb") as out:
            out.write(data)
    print("%s: /proc files of %d processes, and hand-made ones" % (outdir, len(pids)))


def kallsyms(outdir, lines=120):
    """Cuts of /proc/kallsyms (read as root: addresses shown): its start, where the
    symbols are code and data of the kernel image, and the first lines of a few
    modules; every address moved by one offset, the kernel's _stext to 0xffffffff81000000
    and the modules' first to 0xffffffffc0000000 (no KASLR layout of this host kept)."""
    os.makedirs(outdir, exist_ok=True)
    text = open("/proc/kallsyms", "rb").read().splitlines()
    rows = [l.split(b" ", 2) for l in text]
    if all(int(r[0], 16) == 0 for r in rows[:1000]):
        raise SystemExit("kallsyms: addresses hidden (run as root)")
    stext = next(int(r[0], 16) for r in rows if r[2] == b"_stext")
    mods = [int(r[0], 16) for r in rows if b"\t[" in r[2]]
    mod0 = min(mods) if mods else 0

    def moved(l):
        a, rest = l.split(b" ", 1)
        a = int(a, 16)
        a = a - mod0 + 0xffffffffc0000000 if b"\t[" in rest else a - stext + 0xffffffff81000000
        return b"%016x %s" % (a & (1 << 64) - 1, rest)

    starts = {"kallsyms-start": 0, "kallsyms-middle": len(text) // 3}
    for i, m in enumerate(sorted({r[2].split(b"\t")[1] for r in rows if b"\t[" in r[2]})[:3]):
        starts["kallsyms-module-%d" % i] = next(k for k, r in enumerate(rows) if r[2].endswith(m))
    for name, at in starts.items():
        with open(os.path.join(outdir, name), "wb") as out:
            out.write(b"\n".join(moved(l) for l in text[at:at + lines]) + b"\n")
    hidden = b"\n".join(b"0000000000000000 " + l.split(b" ", 1)[1] for l in text[:40]) + b"\n"
    with open(os.path.join(outdir, "kallsyms-hidden"), "wb") as out:
        out.write(hidden)
    # by hand: modules one after another, weak symbols, data, a line cut at a tab after
    # its address, a name of 600 bytes (Linux 6.1 allows 512)
    edges = (b"ffffffff81000000 T _stext\nffffffff81000100 W weak_one\nffffffff81000200 D data\n"
             b"ffffffff81000300 \t x\nffffffff81000400 t " + b"r" * 600 + b"\n"
             b"ffffffffc0001000 t ext4_read\t[ext4]\nffffffffc0002000 T ext4_write\t[ext4]\n"
             b"ffffffffc0003000 t xfs_read\t[xfs]\nffffffffc0004000 t bad\t[unclosed\n")
    with open(os.path.join(outdir, "kallsyms-edges"), "wb") as out:
        out.write(edges)
    print("%s: %d cuts of /proc/kallsyms, and hand-made lines" % (outdir, len(starts) + 1))


EDGE_TLS = r"""/* A tokio-shaped thread-local and the code that writes it: a seed for fuzz_elf_image. */
struct ctx { unsigned long pad[4]; unsigned long tag, id; unsigned long more[5]; unsigned char budget[2]; };
__thread struct ctx context __asm__("_ZN5tokio7runtime7context7CONTEXT7__getit5__KEY17h0123456789abcdefE");
__attribute__((noinline)) unsigned long set_id(unsigned long id) __asm__("_ZN5tokio7runtime7context19set_current_task_id17h0123456789abcdefE");
__attribute__((noinline)) unsigned long set_id(unsigned long id)
{
	unsigned long old = context.id;
	context.tag = 1;
	context.id = id;
	return old;
}
__attribute__((noinline)) void budget(void) __asm__("_ZN5tokio7runtime4coop6budget17h0123456789abcdefE");
__attribute__((noinline)) void budget(void)
{
	*(volatile unsigned short *)context.budget = 0x8001;
}
void _start(void)
{
	set_id(3);
	budget();
	for (;;)
		;
}
"""


def edge_tls(outdir):
    """A 9 KB static program compiled here (gcc -O2 -nostdlib): a thread-local
    named as tokio's CONTEXT, and functions named as tokio's that write its
    task id (a tag, then the id) and its budget (0x8001): what
    src/targets/tokio/tokio_current.c reads of a tokio binary, at a size
    the fuzzer mutates at speed."""
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "ctx.c")
        with open(src, "w") as f:
            f.write(EDGE_TLS)
        subprocess.run(["gcc", "-O2", "-nostdlib", "-static", "-fno-pie", "-no-pie", src, "-o",
                        os.path.join(outdir, "tokio-context")], check=True)
    print("%s: a tokio-shaped thread-local" % outdir)


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
    elif cmd == "go":
        cut_go(args[0], args[1], dwarf=args[2:] == ["dwarf"])
    elif cmd == "edge-go":
        edge_go(args[0])
    elif cmd == "dwarf":
        cut_dwarf(args[0], args[1])
    elif cmd == "edge-dwarf":
        edge_dwarf(args[0])
    elif cmd == "edge-tls":
        edge_tls(args[0])
    elif cmd == "proc":
        proc_files(args[0], args[1:])
    elif cmd == "kallsyms":
        kallsyms(args[0])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
