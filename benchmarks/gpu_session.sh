#!/usr/bin/env bash
# One GPU session's work (benchmarks/gpu_session.py), run on the lent GPU machine from the
# repository root. The machine has PyTorch but not this repository's data or finch-clust; both
# travel in .gpu/ (ignored by git). Prepare it here once:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu
#   cp ../shared/data/install.py ../shared/data/cifar10_jpeg.npz .gpu/
#   .venv/bin/python -m pip download --no-deps -d .gpu finch-clust==0.2.3
# then call the device tool's run with carry [".gpu"], timeout_s 600 and the command
#   bash benchmarks/gpu_session.sh 520            # or: ... 520 --records-only (steps 1-3 ran on an H200, 2026-11-26)
#   or: ... 520 --steps gpu_peak_memory (confirms a528c6a's memory fix and fea4774's one-thread mixture
#   fits: FedGMKD's seconds against FedAvg's; step 4 gets the rest of the budget)
# Result files and records.tar.gz come back under $OUT: copy the result files to
# benchmarks/results/, and unpack records.tar.gz in the repository root.
set -uo pipefail
budget="${1:-520}"
out="${OUT:-/tmp/gpu_session}"
export PYTHONUNBUFFERED=1 FEDKD_DATA=/tmp/fedkd_data
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
mkdir -p "$FEDKD_DATA" "$out"
python3 - <<'PY' || exit 1
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, ".gpu")
from install import decode_jpeg_bundle
target = Path(os.environ["FEDKD_DATA"]) / "cifar10.npz"
np.savez(target, **decode_jpeg_bundle(Path(".gpu/cifar10_jpeg.npz")))
print(f"{target}: ready")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 benchmarks/gpu_session.py --out "$out" --budget "$budget" "${@:2}" 2>&1 | tee "$out/log.txt"
