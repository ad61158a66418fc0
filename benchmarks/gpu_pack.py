"""Pack a dataset of the data directory for a lent GPU machine, which has none.

    python benchmarks/gpu_pack.py fashion_mnist      # writes .gpu/fashion_mnist.npz.xz

The working tree and what it carries may take 64 MiB in all; the tracked tree is about 35 MiB,
so the dataset's npz is written uncompressed and then xz-compressed (Fashion-MNIST: 30 MiB as
``np.savez_compressed`` writes it, 25 MiB this way). ``benchmarks/gpu_session.sh`` unpacks it into
``$FEDKD_DATA`` there; the arrays are checked equal here before the file is kept.
"""

from __future__ import annotations

import io
import lzma
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pack(name: str, folder: Path = ROOT / ".gpu") -> Path:
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
    folder.mkdir(exist_ok=True)
    target = folder / f"{name}.npz.xz"
    target.write_bytes(packed)
    print(f"{target}: {len(packed) / 2**20:.1f} MiB")
    return target


if __name__ == "__main__":
    for dataset in sys.argv[1:] or ["fashion_mnist"]:
        pack(dataset)
