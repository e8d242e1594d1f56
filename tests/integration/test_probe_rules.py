# SPDX-License-Identifier: MIT
"""What the kernel does with a uprobe on each instruction form, as
`asynctraced probe-rules` learnt it, checked against the running kernel by
other means: a perf uprobe event per form, registered where the form is
already mapped (so the kernel judges it at once, and says ENOTSUPP when it
refuses), its hit count read back, the pages a single step or an optimized
probe leaves looked for, and what a hit writes below the stack pointer seen
by a value kept there. Then what the tracer does with the rules: placement
past a refused nop, a cache it cannot trust learnt again, a probe the kernel
refuses placed at its function's entry, or left out with a warning."""
import ctypes
import json
import os
import re
import subprocess
import tempfile
import unittest

from tests.integration import harness

BUILD = harness.BUILD
REFUSED = os.path.join(BUILD, "refused-probe")
CACHE = "/run/asynctraced/uprobe-rules"
RULE = re.compile(r"^([0-9a-f]+) (emulated|single-stepped|optimized|refused|unknown) (\d+) # (.*)$")
ENOTSUPP = 524
KEPT = 0x1122334455667788  # the value kept below the stack pointer across a hit

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]


def learn():
    r = harness.run_tracer("probe-rules")
    if r.returncode != 0:
        raise AssertionError(f"probe-rules failed ({r.returncode}): {r.stderr}")
    return r, [RULE.match(line).groups() for line in r.stdout.splitlines() if RULE.match(line)]


def uprobe_type():
    with open("/sys/bus/event_source/devices/uprobe/type") as f:
        return int(f.read())


def runnable(insn):
    """The form as a function: kept in the red zone, run, the kept value returned;
    one that moves the stack pointer undoes it instead, and returns nothing of use.
    The offset of the form in the code."""
    if insn[0] in range(0x50, 0x58):                                 # push %reg
        return insn + bytes([insn[0] + 8, 0xc3]), 0
    if insn[:1] == b"\x41" and insn[1] in range(0x50, 0x58):         # push %r8-15
        return insn + bytes([0x41, insn[1] + 8, 0xc3]), 0
    if insn[-5:-4] == b"\xe8":                                       # call next; pop
        return insn + b"\x58\xc3", 0
    if insn in (b"\xc3", b"\xf2\xc3"):                               # ret
        return insn, 0
    if insn == bytes.fromhex("4883ec18"):                            # sub; add
        return insn + bytes.fromhex("4883c418c3"), 0
    keep = b"\x48\xb8" + KEPT.to_bytes(8, "little") + b"\x48\x89\x44\x24\xf8"  # mov %rax,-8(%rsp)
    load = b"\x48\x8b\x44\x24\xf8\xc3"                                         # mov -8(%rsp),%rax
    return keep + insn + load, len(keep)


def probe_form(insn):
    """In a child: the form mapped, a perf uprobe on it, run three times. What was seen."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid:
        os.close(wr)
        with os.fdopen(rd) as f:
            out = f.read()
        os.waitpid(pid, 0)
        return json.loads(out)
    os.close(rd)
    seen = {}
    try:
        code, at = runnable(insn)
        fd = os.memfd_create("probe-form")
        os.write(fd, code.ljust(4096, b"\xcc"))
        addr = libc.mmap(None, 4096, 0x1 | 0x4, 0x02, fd, 0)  # PROT_READ|PROT_EXEC, MAP_PRIVATE
        path = ctypes.create_string_buffer(f"/proc/self/fd/{fd}".encode())
        attr = bytearray(128)
        attr[0:4] = uprobe_type().to_bytes(4, "little")
        attr[4:8] = (128).to_bytes(4, "little")
        attr[56:64] = ctypes.addressof(path).to_bytes(8, "little")
        attr[64:72] = at.to_bytes(8, "little")
        buf = (ctypes.c_char * 128).from_buffer(attr)
        pfd = libc.syscall(298, buf, 0, -1, -1, 8)  # perf_event_open(self, any CPU, CLOEXEC)
        if pfd < 0:
            seen["errno"] = ctypes.get_errno()
        else:
            fn = ctypes.CFUNCTYPE(ctypes.c_uint64)(addr)
            seen["kept"] = [fn() == KEPT for _ in range(3)]
            seen["hits"] = int.from_bytes(os.read(pfd, 8), "little")
            with open("/proc/self/maps") as m:
                maps = m.read()
            seen["xol"] = "[uprobes]" in maps
            seen["trampoline"] = "[uprobes-trampoline]" in maps
            seen["stack"] = at == 0
    except Exception as e:  # said to the parent, whatever it was
        seen["error"] = repr(e)
    os.write(wr, json.dumps(seen).encode())
    os._exit(0)


class Learnt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.learnt, cls.rules = learn()

    def test_every_form_judged(self):
        self.assertGreater(len(self.rules), 70, self.learnt.stdout)
        unknown = [name for _, verdict, _, name in self.rules if verdict == "unknown"]
        self.assertEqual(unknown, [], self.learnt.stderr)

    def test_the_kernel_agrees(self):
        """Each form's verdict, as a perf uprobe on it sees it."""
        for hexbytes, verdict, clobbers, name in self.rules:
            with self.subTest(form=name):
                seen = probe_form(bytes.fromhex(hexbytes))
                self.assertNotIn("error", seen)
                if verdict == "refused":
                    self.assertEqual(seen.get("errno"), ENOTSUPP, seen)
                    continue
                self.assertNotIn("errno", seen)
                self.assertEqual(seen["hits"], 3, "every run hit the probe")
                self.assertEqual(seen["xol"], verdict == "single-stepped", seen)
                self.assertEqual(seen["trampoline"], verdict == "optimized", seen)
                if seen["stack"]:
                    continue
                # a hit that writes below the stack pointer loses what was kept there
                self.assertEqual(all(seen["kept"]), int(clobbers) < 8, seen)

    def test_what_this_kernel_does(self):
        """The facts placement was built on, as this kernel (6.18) has them: a
        CS-prefixed nop refused, a 9-byte nop single-stepped, push and jcc
        emulated, a 5-byte nop optimized into a call that writes below the
        stack pointer."""
        by_name = {name: (verdict, int(c)) for _, verdict, c, name in self.rules}
        self.assertEqual(by_name["cs nopw (15 bytes)"][0], "refused")
        self.assertEqual(by_name["push %rbp"][0], "emulated")
        self.assertEqual(by_name["je rel8"][0], "emulated")
        self.assertEqual(by_name["endbr64"][0], "single-stepped")
        self.assertEqual(by_name["nopw 0x0(%rax,%rax,1) (9 bytes)"][0], "single-stepped")
        verdict, clobbers = by_name["nopl 0x0(%rax,%rax,1)"]
        self.assertEqual(verdict, "optimized")
        self.assertGreaterEqual(clobbers, 8)

    def test_kept_for_the_tracer(self):
        st = os.lstat(CACHE)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        with open(CACHE) as f:
            self.assertEqual(f.read(), self.learnt.stdout)


class Placed(unittest.TestCase):
    """The tracer, on a program whose functions hold refused nops."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        learn()  # the true rules in the cache, whatever a test left there

    def tearDown(self):
        learn()

    def trace(self, *args):
        tmp = tempfile.mkdtemp(prefix="asynctraced-refused-")
        run = harness.traced_gated_run("refused", [REFUSED], 1, ["-d", "1", "-v", *args], tmp)
        self.assertEqual(run.tracer_rc, 0, run.describe())
        self.assertTrue(run.attached, run.describe())
        return run.tracer_stderr

    def test_past_a_refused_nop(self):
        err = self.trace()
        self.assertRegex(err, r"attaching raw::schedule at \S+ \(\+13: past mov, at push, emulated\)")
        self.assertNotIn("refused the raw::schedule", err)

    def test_refused_at_the_entry_too(self):
        """Nothing else can be placed: traced without it, and what is lost said."""
        err = self.trace()
        self.assertRegex(err, r"the kernel refused the waker::wake_by_\* probe at \S+ \(nop, and "
                              r"at its entry\): wakes and waker thrash not traced")
        self.assertIn("1 probes refused by the kernel (said above)", err)
        self.assertIn("tracing pid", err)

    def test_rules_that_lie(self):
        """Rules that say the kernel takes what it refuses (learnt on another
        kernel): the refused probe goes to its function's entry."""
        with open(CACHE) as f:
            text = f.read()
        with open(CACHE, "w") as f:
            f.write(re.sub(r"^(6*2e0f1f84[0-9a-f]*) refused", r"\1 emulated", text, flags=re.M))
        err = self.trace()
        self.assertRegex(err, r"attaching raw::schedule at \S+ \(\+3: past mov, at nop, emulated\)")
        self.assertRegex(err, r"the kernel refused the raw::schedule probe at \S+\+3 \(nop\), "
                              r"which its rules said it takes: placed at the entry")

    def test_a_cache_not_to_trust(self):
        """Garbage, or another kernel's rules, in the cache: learnt again, and kept."""
        for junk in ("garbage\n", "kernel 1.0 other\nforms 0\n90 emulated 0 # nop\n"):
            with open(CACHE, "w") as f:
                f.write(junk)
            err = self.trace()
            self.assertRegex(err, r"\(\+13: past mov, at push, emulated\)")
            with open(CACHE) as f:
                self.assertIn("cs nopw (15 bytes)", f.read())


if __name__ == "__main__":
    unittest.main()
