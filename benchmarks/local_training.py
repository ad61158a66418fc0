"""Samples per second of local training for the chapters' models (KnFu M1/M2, cnn5, FedAvgCNN, ResNet-8/32).

    python benchmarks/local_training.py [--batch-size 32] [--samples 4096] [--beside "what else runs"]

Trains one client model with fedkd_core.training.train (SGD, CE) on real data, in float32 and
with bf16 autocast, and prints samples/second for each and which of the two ``auto`` picks on this
CPU. Not a test: numbers depend on the machine, so the CPU model is printed with them, and written
with them to benchmarks/results/local_training-<machine>.json, which the book's Performance page
shows (``--no-save`` only prints).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from fedkd_core import performance
from fedkd_core.data import load_dataset
from fedkd_core.models import InputShape, make_model
from fedkd_core.precision import precision_name, use_bf16
from fedkd_core.results import device_name
from fedkd_core.training import TrainConfig, train

CASES = {"knfu_m1": "mnist", "knfu_m2": "cifar10", "cnn5": "cifar10", "fedavg_cnn": "fashion_mnist",
         "resnet8": "cifar10", "resnet32": "cifar10"}


def samples_per_second(model_name: str, dataset_name: str, batch_size: int, samples: int, mixed: bool) -> float:
    dataset = load_dataset(dataset_name)
    model = make_model(model_name, InputShape(dataset.in_channels, dataset.image_size, 10), seed=0)
    model = model.to(memory_format=torch.channels_last)
    indices = np.arange(samples)
    config = TrainConfig(epochs=1, batch_size=batch_size, lr=0.01, mixed_precision=mixed)
    generator = torch.Generator().manual_seed(0)
    train(model, dataset, indices[: batch_size * 4], config, generator=generator)  # warm-up
    start = time.perf_counter()
    train(model, dataset, indices, config, generator=generator)
    return samples / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args()
    cpu = torch.device("cpu")
    started = performance.beside_now()
    auto = precision_name(use_bf16("auto", cpu))
    print(f"{device_name(cpu)}; torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch_size}; "
          f"mixed_precision 'auto' picks {auto} here")
    rows = []
    for model_name, dataset_name in CASES.items():
        rates = {}
        for mixed in (False, True):
            rates[mixed] = samples_per_second(model_name, dataset_name, args.batch_size, args.samples, mixed)
            print(f"{model_name:12s} {dataset_name:14s} {'bf16' if mixed else 'fp32'}: {rates[mixed]:8.0f} samples/s")
        rows.append({"model": model_name, "dataset": dataset_name, "fp32 samples/s": round(rates[False]),
                     "bf16 samples/s": round(rates[True]), "bf16 / fp32": round(rates[True] / rates[False], 2)})
    if not args.no_save:
        performance.save_result(
            "local_training", "Local training speed", rows, started=started, beside_note=args.beside,
            note=f"One client model trained for one epoch on {args.samples:,} real images, batch {args.batch_size}, "
                 f"SGD, after a 4-batch warm-up; samples per second in fp32 and under bf16 autocast. "
                 f"`mixed_precision: auto` picks **{auto}** on this machine.",
            extra={"order": 1, "digits": {"bf16 / fp32": 2}})


if __name__ == "__main__":
    main()
