"""Test setup: Triton through its CPU interpreter, the tests' faulty components importable by workers."""
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Before anything imports triton: kernels then run on CPU tensors through the interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")
TESTS = Path(__file__).parent
ROOT = TESTS.parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(TESTS))
# Calibration cache per test session, so tests never read or write the user's; removed when the session ends
# (xdist workers inherit the controller's folder).
if "BENCH_CACHE_DIR" not in os.environ:
    os.environ["BENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-test-cache-")
    atexit.register(shutil.rmtree, os.environ["BENCH_CACHE_DIR"], ignore_errors=True)
