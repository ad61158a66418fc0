#!/usr/bin/env bash
# pFedSD's two GPU divergences of FedCKD's Fashion-MNIST n = 100 column (pathological, seeds 1 and 2:
# NaN loss in rounds 18 and 12 on an H200, 2026-11-27), rerun on the lent GPU with a per-step trace
# (benchmarks/trace_divergence.py), four runs at once: each seed with the dropout masks the stored run
# drew (the device's own generator: the records predate mask_generator) and with today's host-drawn
# masks. Run through gpu_session.sh, which prepares the data (the Fashion-MNIST pack in two parts):
#   GPU_COMMAND='bash benchmarks/device_traces.sh' bash benchmarks/gpu_session.sh 0
# Everything comes back as one archive, $OUT/traces.tar.gz (steps, rounds, logs of the four runs).
set -uo pipefail
out="${OUT:-/tmp/gpu_session}"
dir=/tmp/device_traces
mkdir -p "$dir"
export OMP_NUM_THREADS=2
runs=(
  "pfedsd_s1_device results/paper/pfedsd/e4d93f14b78c1811.diverged.json --masks device"
  "pfedsd_s2_device results/paper/pfedsd/064fdc7151d671bc.diverged.json --masks device"
  "pfedsd_s1_host results/paper/pfedsd/e4d93f14b78c1811.diverged.json --masks host --stop-after 30"
  "pfedsd_s2_host results/paper/pfedsd/064fdc7151d671bc.diverged.json --masks host --stop-after 30"
)
pids=()
for run in "${runs[@]}"; do
  set -- $run
  name=$1; shift
  timeout "${TRACE_SECONDS:-420}" python3 benchmarks/trace_divergence.py "$@" --device cuda --out "$dir/$name" \
    > "$dir/$name.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; echo "exit $?"; done
for run in "${runs[@]}"; do set -- $run; echo "== $1"; tail -n 3 "$dir/$1.log"; done
tar -czf "$out/traces.tar.gz" -C "$dir" .
ls -la "$out"
