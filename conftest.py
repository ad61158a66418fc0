"""Test settings: run records go to a throw-away folder, data comes from FEDKD_DATA."""

import os
import tempfile

import pytest

# Set before any notebook kernel starts (nbval kernels inherit the environment), so no test
# writes records into the checkout's results/ folder.
os.environ.setdefault("FEDKD_RESULTS", tempfile.mkdtemp(prefix="fedkd-test-results-"))
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture(scope="session")
def mnist():
    from fedkd_core.data import load_dataset

    return load_dataset("mnist")
