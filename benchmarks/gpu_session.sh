#!/usr/bin/env bash
# One GPU session's work (benchmarks/gpu_session.py), run on the lent GPU machine from the
# repository root. The machine has PyTorch but not this repository's data or finch-clust; what a
# session needs travels in .gpu/ (ignored by git), 64 MiB at most with the working tree. Prepare it
# here once (echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu), then put in it what the session needs:
#   CIFAR-10:       cp ../shared/data/install.py ../shared/data/cifar10_jpeg.npz .gpu/
#   (Fashion-)MNIST: python benchmarks/gpu_pack.py fashion_mnist      # .gpu/fashion_mnist.npz.xz, 25 MiB
#   (where the tree leaves too little room: ... --parts 2, then carry one part per call, back to back,
#   the first with the same command: it keeps its part on the machine and stops until the last comes)
#   FedGMKD:        .venv/bin/python -m pip download --no-deps -d .gpu finch-clust==0.2.3
# then call the device tool's run with carry naming those files, timeout_s 600 and the command
#   bash benchmarks/gpu_session.sh 520            # or: ... 520 --records-only (steps 1-3 ran on an H200, 2026-11-26)
#   or: ... 520 --steps gpu_peak_memory (confirms a528c6a's memory fix and fea4774's one-thread mixture
#   fits: FedGMKD's seconds against FedAvg's; step 4 gets the rest of the budget)
#   or: GPU_MPS=1 ... 520 --records-only --records fedckd:$PWD/.gpu/SUBSET.yaml --records-workers 7
#   (GPU_MPS=1 starts CUDA's multi-process service, so that the workers' small kernels share the GPU
#   at once instead of in turns; if it does not start, the session goes on without it, with
#   GPU_WORKERS_WITHOUT_MPS workers, default 4)
#   GPU_COMMAND='...' runs that command instead of the session, once the data (and MPS) are ready, e.g.
#   benchmarks/device_traces.sh (pFedSD's GPU divergences traced step by step)
#   GPU_DIVERGENCE_CHECK=1 first runs benchmarks/gpu_divergence.py (why pFedSD diverged on the H200; about
#   2 minutes outside the budget: give the session 400 s then)
# Result files and records.tar.gz come back under $OUT: copy the result files to
# benchmarks/results/, and unpack records.tar.gz in the repository root.
set -uo pipefail
budget="${1:-520}"
out="${OUT:-/tmp/gpu_session}"
export PYTHONUNBUFFERED=1 FEDKD_DATA=/tmp/fedkd_data
mkdir -p "$FEDKD_DATA" "$out"
if compgen -G ".gpu/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/*.whl || exit 1
fi
export PYTHONPATH="/tmp/site:$PWD"
python3 - <<'PY'
import lzma, os, re, shutil, sys
from pathlib import Path
import numpy as np
data = Path(os.environ["FEDKD_DATA"])
stash = Path("/tmp/gpu_parts")  # parts carried by earlier calls to this (warm) machine
stash.mkdir(exist_ok=True)
for part in Path(".gpu").glob("*.npz.xz.*of*"):
    shutil.copy(part, stash / part.name)
packs = {packed.name: packed.read_bytes() for packed in sorted(Path(".gpu").glob("*.npz.xz"))}
groups = {}
for part in stash.glob("*.npz.xz.*of*"):  # benchmarks/gpu_pack.py --parts N: NAME.npz.xz.<i>of<N>
    name, i, n = re.fullmatch(r"(.+\.npz\.xz)\.(\d+)of(\d+)", part.name).groups()
    groups.setdefault((name, int(n)), {})[int(i)] = part
for (name, n), parts in sorted(groups.items()):
    if len(parts) < n:
        print(f"{name}: {len(parts)} of {n} parts on this machine; carry the others in the next call, "
              f"while it is warm")
        sys.exit(3)
    packs[name] = b"".join(parts[i].read_bytes() for i in range(1, n + 1))
for name, packed in packs.items():   # benchmarks/gpu_pack.py's files
    target = data / name[:-3]
    target.write_bytes(lzma.decompress(packed))
    print(f"{target}: ready ({len(np.load(target)['y_train'])} training images)")
for bundle in sorted(Path(".gpu").glob("cifar10*_jpeg.npz"))[:1]:  # the whole set, or a subset (timings only)
    sys.path.insert(0, ".gpu")
    from install import decode_jpeg_bundle
    np.savez(data / "cifar10.npz", **decode_jpeg_bundle(bundle))
    print(f"{data / 'cifar10.npz'}: ready, from {bundle.name}")
PY
case $? in 0) ;; 3) exit 0 ;; *) exit 1 ;; esac
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
args=("${@:2}")
if [ "${GPU_MPS:-0}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d && python3 -c "import torch; torch.ones(1, device='cuda').sum().item()"; then
    echo "CUDA MPS: on"
  else
    echo "CUDA MPS: did not start; going on without it"
    echo quit | nvidia-cuda-mps-control 2>/dev/null
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    for i in "${!args[@]}"; do  # fewer workers where they take turns on the GPU
      if [ "${args[$i]}" = --records-workers ] && [ "${args[$((i + 1))]}" -gt "${GPU_WORKERS_WITHOUT_MPS:-4}" ]; then
        args[$((i + 1))]="${GPU_WORKERS_WITHOUT_MPS:-4}"
      fi
    done
  fi
fi
if [ -n "${GPU_COMMAND:-}" ]; then  # a prepared check instead of the session, on the data and MPS set up above
  bash -c "$GPU_COMMAND" 2>&1 | tee "$out/command_log.txt"
  rc=${PIPESTATUS[0]}
  [ "${GPU_MPS:-0}" = 1 ] && echo quit | nvidia-cuda-mps-control 2>/dev/null
  exit "$rc"
fi
if [ "${GPU_DIVERGENCE_CHECK:-0}" = 1 ]; then  # benchmarks/gpu_divergence.py, about 2 minutes, before the budget starts
  python3 benchmarks/gpu_divergence.py --out "$out" 2>&1 | tee "$out/divergence_log.txt"
fi
( while sleep 60; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader | sed 's/^/  gpu: /'; done ) &
monitor=$!
python3 benchmarks/gpu_session.py --out "$out" --budget "$budget" "${args[@]}" 2>&1 | tee "$out/log.txt"
rc=${PIPESTATUS[0]}
kill "$monitor" 2>/dev/null
[ "${GPU_MPS:-0}" = 1 ] && echo quit | nvidia-cuda-mps-control 2>/dev/null
exit "$rc"
