# SPDX-License-Identifier: MIT
"""The tree's layers, as docs/architecture.md draws them, kept by the includes.

Each folder of src/ is a layer; a file includes headers of its own layer and
of the layers below it, named by their folder ("pipeline/detect.h"), and
nothing else: the commands on top, then the session, then what the session
puts together, down to the plumbing. A lower layer that needs something of a
higher one gets it as a struct or a callback it defines itself (the session's
settings are struct session_opts, not the command line's struct options).
"""
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(ROOT, "src")

# Top to bottom; a layer may include those of a greater rank (or its own).
RANK = {
    "cmd": 0,        # each command's flow, from the command line
    "session": 1,    # trace and record: the processes, the loop
    "gate": 2,       # run's gates on a summary
    "sinks": 2,      # where records and reports go
    "capture": 2,    # captures written and replayed
    "analyser": 3,   # the targets' files read as nobody, and the plan it sends back
    "source": 3,     # the BPF side: load, attach, rings, snapshots
    "tasks": 3.5,    # tasks read from a process's memory (in the analyser), and their list
    "pipeline": 4,   # model, detectors, their thresholds, the sink interface
    "targets": 4,    # what runs on the host, and where to probe it
    "stacks": 5,     # unwinding and symbolising
    "lib": 6,        # plumbing
}
# Headers found outside src/: the BPF contract and the generated skeleton.
OUTSIDE = re.compile(r"^(asynctraced\.h|[a-z_]+\.skel\.h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes():
    """(file, its layer, an included header) for every quoted include in src/: a layer is
    a folder of src/ and everything below it (targets/tokio/ is targets)."""
    for folder in sorted(os.listdir(SRC)):
        if not os.path.isdir(os.path.join(SRC, folder)):
            continue
        for top, _, names in sorted(os.walk(os.path.join(SRC, folder))):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    path = os.path.join(top, name)
                    with open(path) as f:
                        for header in INCLUDE.findall(f.read()):
                            yield os.path.relpath(path, ROOT), folder, header


def upward(triples):
    """The includes of a higher layer's header."""
    return [(f, h) for f, layer, h in triples
            if "/" in h and RANK[h.split("/")[0]] < RANK[layer]]


class Layers(unittest.TestCase):
    def test_every_folder_is_a_layer(self):
        folders = {d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))}
        self.assertEqual(folders, set(RANK), "a folder of src/ with no place among the layers")
        loose = [f for f in os.listdir(SRC) if os.path.isfile(os.path.join(SRC, f))]
        self.assertEqual(loose, [], "every source file lives in a layer's folder")

    def test_every_layer_says_its_job(self):
        for folder in RANK:
            readme = os.path.join(SRC, folder, "README.md")
            self.assertTrue(os.path.exists(readme), f"src/{folder} has no README.md")
            with open(readme) as f:
                self.assertTrue(f.readline().startswith(f"# src/{folder}: "), readme)

    def test_includes_name_their_folder(self):
        bare = [(f, h) for f, _, h in includes() if "/" not in h and not OUTSIDE.match(h)]
        self.assertEqual(bare, [])
        for f, _, h in includes():
            if "/" in h:
                self.assertTrue(os.path.exists(os.path.join(SRC, h)), f"{f}: {h}")

    def test_no_layer_includes_a_higher_one(self):
        self.assertEqual(upward(includes()), [])

    def test_the_checker_sees_a_violation(self):
        # a sink reaching for the command line, a sibling and a lower layer
        seen = [("src/sinks/x.c", "sinks", "cmd/options.h"),
                ("src/sinks/x.c", "sinks", "capture/capture.h"),
                ("src/sinks/x.c", "sinks", "lib/util.h")]
        self.assertEqual(upward(seen), [("src/sinks/x.c", "cmd/options.h")])


if __name__ == "__main__":
    unittest.main()
