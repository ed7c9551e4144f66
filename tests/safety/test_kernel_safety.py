"""Each input that once made a C kernel read freed memory (tests/safety/cases.py), run in a
process of its own under ``PYTHONMALLOC=debug`` with the kernels on: the process ends well.

Before the kernels held what they read (the tree before issue 20), the candidate dict's key,
the finaliser that clears the list and the word set index crashed the process (SIGSEGV) and
the finaliser that swaps the metadata made the kernel defer on valid input.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.property.kernels import stage_kernels
from tests.safety.cases import CASES

stage_kernels("candidates")
stage_kernels("features")

CASES_PY = Path(__file__).with_name("cases.py")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_case_runs_to_its_end_under_the_debug_allocator(case):
    env = {**os.environ, "PYTHONMALLOC": "debug", "PYTHONFAULTHANDLER": "1"}
    env.pop("HEAPRANK_PURE_PYTHON", None)
    proc = subprocess.run([sys.executable, str(CASES_PY), case], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode,
                                                                 proc.stderr[-2000:])
