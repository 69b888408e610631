"""Test setup: Triton through its CPU interpreter, the tests' faulty components importable by workers."""
import os
import sys
from pathlib import Path

# Before anything imports triton: kernels then run on CPU tensors through the interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")
TESTS = Path(__file__).parent
ROOT = TESTS.parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(TESTS))
# Calibration cache per test session, so tests never read or write the user's.
os.environ.setdefault("BENCH_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-test-cache-{os.getpid()}"))
