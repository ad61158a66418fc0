"""Why pFedSD's paper-scale pathological runs diverge on a GPU and not on a CPU: a prepared device check.

    GPU_DIVERGENCE_CHECK=1 GPU_MPS=1 bash benchmarks/gpu_session.sh 400 --records-only \
        --records fedckd:paper/fedckd_fmnist100.yaml --records-workers 12   # first this, then records
    python benchmarks/gpu_divergence.py --out DIR                    # on the lent GPU, about 2 minutes
    python benchmarks/gpu_divergence.py --out DIR --device cpu --smoke   # the same steps, seconds, on a CPU

What was seen (2026-11-27): FedCKD's Fashion-MNIST n = 100 column, pathological, pFedSD seeds 1 and 2
diverged on an NVIDIA H200 (training loss NaN in rounds 18 and 12; fp32, deterministic algorithms,
TF32 off) and finished on an AMD EPYC Zen 5 (97.13 % and 97.27 %, ``results/machine_checks/``); seed 0
finished on the CPU and ran 24 rounds on the GPU without diverging. The one device-dependent setting
in training is :data:`fedkd_core.training.INFERENCE_BATCH` (2048 on CUDA, 128 on a CPU), the batch of
the teachers' logits, which in eval mode should change only rounding.

This script runs seed 1 up to ``--rounds`` rounds twice, in two processes at once: as the sweep ran
it, and with the CUDA inference batch set to the CPU's 128. Every batch's loss and the largest
absolute student and teacher logit go to ``DIR/divergence_<variant>.json``; a run stops at the first
non-finite loss, which it reports with the batches before it. If both variants diverge at the same
round the inference batch is ruled out, and the logit trace says whether the blow-up is sudden (one
step) or a climb over many steps (a learning-rate edge).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SUBSET = ROOT / "notebooks" / "params" / "paper" / "fedckd_fmnist100.yaml"
KEEP = 200  # the batches kept before the first non-finite loss


def pathological_config(seed: int, rounds: int, smoke: bool):
    """pFedSD, pathological, ``seed``, of the paper column, stopped after ``rounds`` rounds (with
    ``smoke``: 10 clients of 60 images, for a CPU check of the script itself)."""
    from fedkd_core.sweep import load_grid

    _, configs = load_grid("fedckd", SUBSET)
    config = next(c for c in configs if c.algorithm == "pfedsd" and c.seed == seed
                  and c.data.partition == "pathological")
    if smoke:
        config = replace(config, data=replace(config.data, num_clients=10, pool_size=600, local_test_size=20))
    return replace(config, rounds=rounds)


def traced_run(variant: str, inference_batch: int | None, device: str, seed: int, rounds: int, smoke: bool,
               out: Path) -> None:
    import torch

    from fedkd_core import training
    from fedkd_core.algorithms import pfedsd
    from fedkd_core.experiment import RunDiverged, simulate

    if inference_batch:
        training.INFERENCE_BATCH["cuda"] = inference_batch
    trace: list[dict] = []
    loss_of = pfedsd.fedckd_loss

    def traced(student_logits, labels, teachers, *args):
        loss = loss_of(student_logits, labels, teachers, *args)
        trace.append({"loss": float(loss.detach()), "student_max": float(student_logits.detach().abs().max()),
                      "teacher_max": max((float(t.abs().max()) for t in teachers), default=0.0)})
        del trace[:-KEEP]
        return loss

    pfedsd.fedckd_loss = traced
    config = pathological_config(seed, rounds, smoke)
    began = time.perf_counter()
    try:
        outcome = simulate(config, device=torch.device(device), progress=False)
        result = {"diverged": False, "rounds": rounds, "alma": [h["alma"] for h in outcome["history"]]}
    except RunDiverged as error:
        result = {"diverged": True, "round": error.round_index, "error": str(error),
                  "alma": [h["alma"] for h in error.history]}
    result |= {"variant": variant, "inference_batch": inference_batch or training.INFERENCE_BATCH.get("cuda"),
               "device": device, "seconds": round(time.perf_counter() - began, 1), "last_batches": trace}
    (out / f"divergence_{variant}.json").write_text(json.dumps(result, indent=1) + "\n")
    tail = trace[-3:]
    print(f"{variant}: diverged={result['diverged']} round={result.get('round', '-')} "
          f"seconds={result['seconds']} last losses={[round(t['loss'], 3) for t in tail]} "
          f"student max={[round(t['student_max'], 1) for t in tail]}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=22, help="seed 1 diverged in round 18 on the H200")
    parser.add_argument("--smoke", action="store_true", help="10 clients of 60 images, 1 round: checks the script")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rounds = 1 if args.smoke else args.rounds
    context = multiprocessing.get_context("spawn")  # each variant sets its own inference batch
    runs = [context.Process(target=traced_run, args=(variant, batch, args.device, args.seed, rounds, args.smoke,
                                                     args.out))
            for variant, batch in (("as_swept", None), ("inference_batch_128", 128))]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    if any(run.exitcode for run in runs):
        raise SystemExit(f"a variant failed: exit codes {[run.exitcode for run in runs]}")


if __name__ == "__main__":
    main()
