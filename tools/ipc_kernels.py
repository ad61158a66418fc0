"""Jupyter kernels on Unix sockets instead of TCP ports, for the test suite and ``make book``.

jupyter_client chooses a kernel's five TCP ports by binding port 0 and closing the socket; the
kernel binds them a moment later. When kernels start beside other busy processes (xdist workers
each starting kernels, Ray in the Flower tests, chromium in the browser check), another process
can take a port in that gap: the kernel dies with "Address already in use" and papermill or nbval
waits 60 s and fails with "Kernel didn't respond". CI failed that way once (2026-11-25). A Unix
socket is a file whose name is unique to its kernel, so no other process can take it.

- ``execute_notebook`` is ``papermill.execute_notebook`` with such a kernel;
- ``UnixSocketKernelManager`` is the synchronous manager nbval needs (conftest.py installs it);
- run as a script, it executes one chapter with a YAML profile (``make book`` does, in parallel)::

      python tools/ipc_kernels.py notebooks/knfu.ipynb out.ipynb notebooks/params/quick/knfu.yaml

A user running one notebook by hand needs none of this: ``papermill`` alone is fine.
"""

import argparse
import logging
import os
import tempfile
import uuid

import papermill
from jupyter_client.connect import ConnectionFileMixin
from jupyter_client.manager import AsyncKernelManager, KernelManager
from papermill.iorw import read_yaml_file
from traitlets import default


class UnixSockets(ConnectionFileMixin):
    """Connect over IPC; each manager's socket files get a fresh, short name (paths cap at ~107 bytes)."""

    @default("transport")
    def _unix_sockets(self) -> str:
        return "ipc"

    @default("ip")
    def _unique_socket_prefix(self) -> str:
        if self.transport != "ipc":  # someone chose TCP after all: jupyter_client's own default
            return super()._ip_default()
        # Absolute: the kernel may run in another working directory than its manager.
        return os.path.join(tempfile.gettempdir(), f"fedkd-kernel-{uuid.uuid4().hex[:12]}")


class UnixSocketKernelManager(UnixSockets, KernelManager):
    """A blocking kernel manager on Unix sockets (what nbval drives)."""


class AsyncUnixSocketKernelManager(UnixSockets, AsyncKernelManager):
    """An asyncio kernel manager on Unix sockets (what papermill drives)."""


def execute_notebook(input_path, output_path, **kwargs):
    """``papermill.execute_notebook`` with its kernel on Unix sockets."""
    return papermill.execute_notebook(str(input_path), str(output_path),
                                      kernel_manager_class=AsyncUnixSocketKernelManager, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description="Execute a chapter with a parameters file, its kernel on Unix sockets.")
    parser.add_argument("notebook")
    parser.add_argument("output")
    parser.add_argument("parameters", help="papermill YAML of the profile")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # as papermill's CLI logs
    execute_notebook(args.notebook, args.output, parameters=read_yaml_file(args.parameters))


if __name__ == "__main__":
    main()
