"""Test settings: run records go to a throw-away folder, data comes from FEDKD_DATA."""

import os
import tempfile

import pytest

try:  # nbval runs the chapters; a machine without it (a lent GPU's image) still runs the tests under tests/
    import nbval.kernel
except ImportError:
    nbval = None

# Set before any notebook kernel starts (nbval kernels inherit the environment), so no test
# writes records into the checkout's results/ folder.
os.environ.setdefault("FEDKD_RESULTS", tempfile.mkdtemp(prefix="fedkd-test-results-"))
os.environ.setdefault("PYTHONHASHSEED", "0")
# nbval's kernels on Unix sockets, not TCP ports that another process can take before the kernel
# binds them (that once failed CI; tools/ipc_kernels.py). Tests run papermill through its
# execute_notebook for the same reason.
if nbval is not None:
    from tools.ipc_kernels import UnixSocketKernelManager

    nbval.kernel.KernelManager = UnixSocketKernelManager


@pytest.fixture(scope="session")
def mnist():
    from fedkd_core.data import load_dataset

    return load_dataset("mnist")
