# SPDX-License-Identifier: MIT
"""The integration tests (docs/testing.md). Every file they make goes under
one directory of this run, removed when the run ends: a full run writes
gigabytes of traces, and a developer's /tmp is not a CI machine's, fresh
each time. ASYNCTRACED_KEEP_TEST_FILES=1 keeps it, and says where."""
import atexit
import os
import shutil
import sys
import tempfile

if not tempfile.tempdir:
    RUN_DIR = tempfile.mkdtemp(prefix="asynctraced-tests-")
    # the commands some tests run as another user reach their own directories in it
    os.chmod(RUN_DIR, 0o755)
    tempfile.tempdir = RUN_DIR

    def _clean():
        if os.environ.get("ASYNCTRACED_KEEP_TEST_FILES") == "1":
            print(f"integration tests: their files are kept in {RUN_DIR}", file=sys.stderr)
        else:
            shutil.rmtree(RUN_DIR, ignore_errors=True)

    atexit.register(_clean)
