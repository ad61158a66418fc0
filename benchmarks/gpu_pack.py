"""Pack a dataset of the data directory for a lent GPU machine, which has none.

    python benchmarks/gpu_pack.py fashion_mnist            # writes .gpu/fashion_mnist.npz.xz
    python benchmarks/gpu_pack.py fashion_mnist --parts 2  # .gpu/fashion_mnist.npz.xz.1of2, .2of2

The working tree and what it carries may take 64 MiB in all, and the tracked tree grows with every
committed record (37 MiB on 2026-11-27, most of it results/), so the dataset's npz is written
uncompressed and then xz-compressed (Fashion-MNIST: 30 MiB as ``np.savez_compressed`` writes it,
25 MiB this way; delta filters do worse). ``benchmarks/gpu_session.sh`` unpacks it into
``$FEDKD_DATA`` there; the arrays are checked equal here before the file is kept, and the room the
tree and the pack leave of the 64 MiB is printed (a pack that cannot travel is refused).
"""

from __future__ import annotations

import io
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TRAVEL_LIMIT = 64 * 2**20  # what a device call may carry, working tree included


def tracked_bytes(root: Path = ROOT) -> int:
    """The size of the files git tracks in ``root``: what travels with every device call."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return sum((root / name).stat().st_size for name in names.decode().split("\0") if name and (root / name).is_file())


def room_left(packed_bytes: int, tree_bytes: int) -> int:
    """Bytes of :data:`TRAVEL_LIMIT` left once the tree and the pack travel (negative: too much)."""
    return TRAVEL_LIMIT - tree_bytes - packed_bytes


def pack(name: str, folder: Path = ROOT / ".gpu", parts: int = 1) -> list[Path]:
    from fedkd_core.data import data_dir

    source = data_dir() / f"{name}.npz"
    if not source.exists():
        raise SystemExit(f"{source} is missing: run `make data` first")
    arrays = dict(np.load(source))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    packed = lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    unpacked = np.load(io.BytesIO(lzma.decompress(packed)))
    if set(unpacked.files) != set(arrays) or any(not np.array_equal(unpacked[k], arrays[k]) for k in arrays):
        raise SystemExit(f"{name}: the packed arrays differ from {source}")
    size = -(-len(packed) // parts)  # each part carries at most this much, with the tree, in one call
    chunks = [packed[i:i + size] for i in range(0, len(packed), size)]
    tree = tracked_bytes()
    left = room_left(size, tree)
    if left < 0:
        raise SystemExit(f"{name}: the tracked tree ({tree / 2**20:.1f} MiB) and a pack of {size / 2**20:.1f} MiB "
                         f"exceed the {TRAVEL_LIMIT / 2**20:.0f} MiB a device call may carry: use more --parts")
    folder.mkdir(exist_ok=True)
    for old in [*folder.glob(f"{name}.npz.xz"), *folder.glob(f"{name}.npz.xz.*of*")]:
        old.unlink()  # an earlier pack's whole file or parts would be unpacked beside this one
    if len(chunks) == 1:
        targets = [folder / f"{name}.npz.xz"]
    else:
        targets = [folder / f"{name}.npz.xz.{i}of{len(chunks)}" for i in range(1, len(chunks) + 1)]
    for target, chunk in zip(targets, chunks):
        target.write_bytes(chunk)
    print(f"{', '.join(t.name for t in targets)} in {folder}: {size / 2**20:.1f} MiB a call; with the tracked tree "
          f"({tree / 2**20:.1f} MiB) {left / 2**20:.1f} MiB of the {TRAVEL_LIMIT / 2**20:.0f} MiB are left for what "
          f"else a call carries")
    return targets


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="*", default=["fashion_mnist"])
    parser.add_argument("--parts", type=int, default=1,
                        help="split each pack into N files, one per device call (gpu_session.sh joins them)")
    args = parser.parse_args()
    for dataset in args.datasets:
        pack(dataset, parts=args.parts)
