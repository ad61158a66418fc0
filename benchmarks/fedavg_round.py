"""Seconds per FedAvg round, samples/s, and achieved GFLOP/s against this machine's ceiling.

    python benchmarks/fedavg_round.py                      # our Dir(0.1) split of MNIST, 20 clients
    python benchmarks/fedavg_round.py --split FILE.npz     # a given split, e.g. PFLlib's own

The configuration is PFLlib's FedAvg on MNIST: 20 clients, all selected, FedAvgCNN, batch 10,
SGD lr 0.005 without momentum, one local epoch. The round (download, every client's local
epoch, upload, aggregation) is timed; evaluation is not. ``--split`` takes an .npz holding
``x_train`` (N, 28, 28) uint8, ``y_train`` and ``client_sizes`` (the clients' training sets
concatenated in client order), which becomes a FederatedData from index arrays.

The ceiling is measured here and now: the best of a 1024x1024 matmul and the model's largest
convolution (forward), in GFLOP/s on the same number of threads. Not a test: numbers depend on
the machine, so the CPU model is printed with them, and written with them to
benchmarks/results/fedavg_round-<machine>.json for the book's Performance page (``--no-save``
only prints).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from fedkd_core import performance
from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.data import DATASETS, ImageDataset, load_dataset
from fedkd_core.experiment import _run_round
from fedkd_core.federation import DataConfig, FederatedData, build_federated_data
from fedkd_core.precision import precision_name, use_bf16
from fedkd_core.results import device_name
from fedkd_core.training import TrainConfig

TRAIN = TrainConfig(epochs=1, batch_size=10, lr=0.005, momentum=0.0, mixed_precision=False)
DATA = DataConfig("mnist", num_clients=20, partition="dirichlet", alpha=0.1, local_test_size=1)  # tests unused: not timed


def split_from_file(path: Path) -> FederatedData:
    """A FederatedData whose clients hold consecutive blocks of the file's training arrays."""
    arrays = np.load(path)
    info = DATASETS["mnist"]
    dataset = ImageDataset("mnist", torch.from_numpy(arrays["x_train"]), torch.from_numpy(arrays["y_train"]).long(),
                           torch.from_numpy(arrays["x_train"][:1]), torch.from_numpy(arrays["y_train"][:1]).long(),
                           info.num_classes, info.mean, info.std)
    bounds = np.concatenate([[0], np.cumsum(arrays["client_sizes"])])
    clients = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    empty = np.array([], dtype=np.int64)
    return FederatedData(dataset, replace(DATA, num_clients=len(clients)), clients, [empty] * len(clients), empty, empty)


def flops_per_sample(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Forward + backward FLOPs of one training step, per sample (torch's flop counter)."""
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(x)


def ceiling_gflops(conv_shape: tuple[int, ...], weight_shape: tuple[int, ...]) -> dict[str, float]:
    def rate(fn, flops: float, repeats: int = 20) -> float:
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return flops * repeats / (time.perf_counter() - start) / 1e9

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    x = torch.randn(*conv_shape).contiguous(memory_format=torch.channels_last)
    w = torch.randn(*weight_shape)
    out = F.conv2d(x, w)
    conv_flops = 2 * out.numel() * weight_shape[1] * weight_shape[2] * weight_shape[3]
    return {"matmul": rate(lambda: a @ b, 2 * 1024 ** 3), "conv": rate(lambda: F.conv2d(x, w), conv_flops)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", type=Path, default=None, help=".npz with x_train, y_train, client_sizes")
    parser.add_argument("--rounds", type=int, default=2, help="rounds to time (the first includes warm-up)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args()
    started = performance.beside_now()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")

    data = split_from_file(args.split) if args.split else build_federated_data(DATA, seed=0, dataset=load_dataset("mnist"))
    samples = sum(len(c) for c in data.client_train)
    ctx = Context(data=data, model_name="fedavg_cnn", train=TRAIN, device=device, seed=0)
    fedavg = algorithm_class("fedavg")(algorithm_config("fedavg", {}), ctx)
    print(f"{device_name(device)}; torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{precision_name(use_bf16(TRAIN.mixed_precision, device))}")
    print(f"split: {args.split or 'ours, Dir(0.1) seed 0'}: {data.num_clients} clients, {samples} training samples")

    x = data.dataset.on(device).train.images[:TRAIN.batch_size].permute(0, 3, 1, 2)
    flops = flops_per_sample(ctx.new_model(), x, data.dataset.on(device).train.labels[:TRAIN.batch_size])
    ceiling = ceiling_gflops((64, 32, 12, 12), (64, 32, 5, 5))
    print(f"work: {flops / 1e6:.1f} MFLOP per training sample (forward + backward); ceiling here: "
          f"matmul {ceiling['matmul']:.1f}, conv {ceiling['conv']:.1f} GFLOP/s")
    rows = []
    for round_index in range(1, args.rounds + 1):
        start = time.perf_counter()
        _run_round(fedavg, round_index, list(range(data.num_clients)))
        seconds = time.perf_counter() - start
        achieved = samples * flops / seconds / 1e9
        share = 100 * achieved / max(ceiling.values())
        print(f"round {round_index}: {seconds:.1f} s, {samples / seconds:.0f} samples/s, {achieved:.1f} GFLOP/s "
              f"({share:.0f}% of the ceiling)")
        rows.append({"round": round_index, "seconds": round(seconds, 1), "samples/s": round(samples / seconds),
                     "GFLOP/s": round(achieved, 1), "% of the ceiling": round(share)})
    if not args.no_save:
        split = f"the split in {args.split.name}" if args.split else "our Dir(0.1) split of MNIST (seed 0)"
        performance.save_result(
            "fedavg_round", "One FedAvg round (PFLlib's configuration)", rows, started=started,
            beside_note=args.beside,
            note=f"FedAvgCNN on {split}: {data.num_clients} clients, all selected, {samples:,} training samples, "
                 f"batch {TRAIN.batch_size}, SGD lr {TRAIN.lr} without momentum, one local epoch, fp32, "
                 f"{torch.get_num_threads()} thread(s); evaluation not timed (round 1 includes warm-up). "
                 f"Work: {flops / 1e6:.1f} MFLOP per training sample (forward + backward). Ceiling measured "
                 f"alongside: matmul {ceiling['matmul']:.1f}, convolution {ceiling['conv']:.1f} GFLOP/s.",
            extra={"order": 2, "digits": {"seconds": 1, "GFLOP/s": 1}})


if __name__ == "__main__":
    main()
