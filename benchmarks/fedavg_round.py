"""Seconds per FedAvg round against PFLlib's and against this machine's floor.

    python benchmarks/fedavg_round.py                      # our Dir(0.1) split of MNIST, 20 clients
    python benchmarks/fedavg_round.py --split FILE.npz     # a given split
    python benchmarks/fedavg_round.py --pfllib DIR         # PFLlib's own split and round, side by side

``--pfllib DIR`` takes a checkout of TsingZ0/PFLlib (``dataset/utils`` and ``system/`` are read):
its ``generate_MNIST.py`` split (Dir(0.1), 20 clients, seeds 1, train/test 75/25 per client) is
drawn with PFLlib's own ``separate_data`` and ``split_data`` from our copy of MNIST (torchvision's
order: the 60,000 training images, then the 10,000 test images), written in PFLlib's format to a
temporary folder, and each round PFLlib's ``clientAVG`` trains on its files (``set_parameters``,
``train`` with its DataLoader, then ``serverbase``'s weighted sum), while our FedAvg trains on the
same clients' samples.

The floor is the least any FedAvg implementation can spend here: the same model, the same number
of steps per client, forward + cross-entropy + backward + the SGD update on batch tensors made
beforehand, in the tightest loop torch allows (``torch.autograd.grad`` and one foreach add; no
data loading, no model copies, no aggregation, nothing else timed). Each round times ours, PFLlib's
and the floor one after another, in alternating order, so the ratios are measured side by side
under the same load.

The configuration is PFLlib's FedAvg on MNIST: 20 clients, all selected, FedAvgCNN, batch 10,
SGD lr 0.005 without momentum, one local epoch. The round (download, every client's local
epoch, upload, aggregation) is timed; evaluation is not. ``--split`` takes an .npz holding
``x_train`` (N, 28, 28) uint8, ``y_train`` and ``client_sizes`` (the clients' training sets
concatenated in client order), which becomes a FederatedData from index arrays.

The GFLOP/s ceiling is measured here and now: the best of a 1024x1024 matmul and the model's largest
convolution (forward), in GFLOP/s on the same number of threads. Not a test: numbers depend on
the machine, so the CPU model is printed with them, and written with them to
benchmarks/results/fedavg_round-<machine>.json for the book's Performance page (``--no-save``
only prints).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import os
import random
import statistics
import sys
import tempfile
import time
import types
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
from fedkd_core.training import TrainConfig, iterate_batches

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


def pfllib_split(pfllib: Path, folder: Path) -> Path:
    """PFLlib's MNIST split (its generate_MNIST.py, ``noniid - dir``) drawn by its own code from
    our MNIST arrays; its client files written under ``folder``/dataset/MNIST in its format, and
    the clients' training sets (uint8, in PFLlib's order) to an .npz for :func:`split_from_file`."""
    sys.modules.setdefault("ujson", __import__("json"))  # PFLlib's config writer; not used here
    sys.path.insert(0, str(pfllib / "dataset" / "utils"))
    import dataset_utils  # PFLlib's

    mnist = load_dataset("mnist")
    images = np.concatenate([mnist.x_train.numpy(), mnist.x_test.numpy()])
    labels = np.concatenate([mnist.y_train.numpy(), mnist.y_test.numpy()]).astype(np.int64)
    random.seed(1)
    np.random.seed(1)
    with contextlib.redirect_stdout(io.StringIO()):
        X, y, _ = dataset_utils.separate_data((np.arange(len(labels)), labels), 20, 10, True, False, "dir")
        train_data, _ = dataset_utils.split_data(X, y)
    (folder / "system").mkdir(parents=True, exist_ok=True)
    (folder / "dataset" / "MNIST" / "train").mkdir(parents=True, exist_ok=True)
    for k, client in enumerate(train_data):
        x = ((images[client["x"]].astype(np.float32) / 255.0 - 0.5) / 0.5)[:, None]  # ToTensor, Normalize(0.5, 0.5)
        with open(folder / "dataset" / "MNIST" / "train" / f"{k}.npz", "wb") as f:
            np.savez_compressed(f, data={"x": x, "y": client["y"]})
    rows = np.concatenate([client["x"] for client in train_data])
    path = folder / "split.npz"
    np.savez(path, x_train=images[rows], y_train=labels[rows], client_sizes=[len(c["y"]) for c in train_data])
    return path


class PFLlibRound:
    """PFLlib's FedAvg round on its own client files: serverbase's send_models, every clientAVG's
    train (which reads its client file and builds its DataLoader, as PFLlib does each round), then
    receive_models' weights and aggregate_parameters' sum."""

    def __init__(self, pfllib: Path, folder: Path, sizes: list[int]):
        sys.path.insert(0, str(pfllib / "system"))
        from flcore.clients.clientavg import clientAVG
        from flcore.trainmodel.models import FedAvgCNN

        self.folder = folder
        args = types.SimpleNamespace(
            model=FedAvgCNN(in_features=1, num_classes=10, dim=1024), algorithm="FedAvg", dataset="MNIST",
            device="cpu", save_folder_name="", num_classes=10, batch_size=TRAIN.batch_size,
            local_learning_rate=TRAIN.lr, local_epochs=TRAIN.epochs, few_shot=0, learning_rate_decay=False,
            learning_rate_decay_gamma=0.99)
        self.global_model = copy.deepcopy(args.model)
        self.clients = [clientAVG(args, k, n, 0, train_slow=False, send_slow=False) for k, n in enumerate(sizes)]

    def __call__(self) -> None:
        here = os.getcwd()
        os.chdir(self.folder / "system")  # PFLlib reads ../dataset/MNIST/train/<id>.npz
        try:
            for client in self.clients:
                client.set_parameters(self.global_model)
            for client in self.clients:
                client.train()
            total = sum(client.train_samples for client in self.clients)
            self.global_model = copy.deepcopy(self.clients[0].model)
            for param in self.global_model.parameters():
                param.data.zero_()
            for client in self.clients:
                for server_param, client_param in zip(self.global_model.parameters(), client.model.parameters()):
                    server_param.data += client_param.data.clone() * (client.train_samples / total)
        finally:
            os.chdir(here)


def floor_round(ctx: Context, data: FederatedData, round_index: int) -> float:
    """Seconds of the floor: every client's steps (forward, loss, backward, SGD update) on batches
    gathered before the clock starts, in the tightest loop; only the loops are timed."""
    model = ctx.new_model()
    model.train()
    params = list(model.parameters())
    seconds = 0.0
    for k, indices in enumerate(data.client_train):
        generator = torch.Generator().manual_seed(round_index * 1000 + k)
        batches = [(b.x.clone(), b.y.clone()) for b in iterate_batches(
            data.dataset, indices, TRAIN.batch_size, device=ctx.device, generator=generator)]
        start = time.perf_counter()
        for x, y in batches:
            grads = torch.autograd.grad(F.cross_entropy(model(x), y), params)
            with torch.no_grad():
                torch._foreach_add_(params, grads, alpha=-TRAIN.lr)
        seconds += time.perf_counter() - start
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", type=Path, default=None, help=".npz with x_train, y_train, client_sizes")
    parser.add_argument("--pfllib", type=Path, default=None, help="a PFLlib checkout: its split, its round beside ours")
    parser.add_argument("--rounds", type=int, default=3, help="rounds to time (the first includes warm-up)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args()
    started = performance.beside_now()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")

    folder = Path(tempfile.mkdtemp(prefix="pfllib-"))
    split = pfllib_split(args.pfllib, folder) if args.pfllib else args.split
    data = split_from_file(split) if split else build_federated_data(DATA, seed=0, dataset=load_dataset("mnist"))
    samples = sum(len(c) for c in data.client_train)
    ctx = Context(data=data, model_name="fedavg_cnn", train=TRAIN, device=device, seed=0)
    fedavg = algorithm_class("fedavg")(algorithm_config("fedavg", {}), ctx)
    pfllib = PFLlibRound(args.pfllib, folder, [len(c) for c in data.client_train]) if args.pfllib else None
    print(f"{device_name(device)}; torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{precision_name(use_bf16(TRAIN.mixed_precision, device))}")
    print(f"split: {'PFLlib' if args.pfllib else split or 'ours, Dir(0.1) seed 0'}: {data.num_clients} clients, "
          f"{samples} training samples")

    x = data.dataset.on(device).train.images[:TRAIN.batch_size].permute(0, 3, 1, 2)
    flops = flops_per_sample(ctx.new_model(), x, data.dataset.on(device).train.labels[:TRAIN.batch_size])
    ceiling = ceiling_gflops((64, 32, 12, 12), (64, 32, 5, 5))
    print(f"work: {flops / 1e6:.1f} MFLOP per training sample (forward + backward); ceiling here: "
          f"matmul {ceiling['matmul']:.1f}, conv {ceiling['conv']:.1f} GFLOP/s")

    def ours(round_index: int) -> None:
        _run_round(fedavg, round_index, list(range(data.num_clients)))

    rows = []
    for round_index in range(1, args.rounds + 1):
        timed = {"fedkd": ours, "floor": lambda r: floor_round(ctx, data, r)}
        if pfllib:
            timed["PFLlib"] = lambda r: pfllib()
        order = list(timed) if round_index % 2 else list(timed)[::-1]  # alternating, so drift in load hits both
        seconds = {}
        for name in order:
            start = time.perf_counter()
            inner = timed[name](round_index)
            seconds[name] = inner if name == "floor" else time.perf_counter() - start
        row = {"round": round_index, "fedkd s": seconds["fedkd"], "PFLlib s": seconds.get("PFLlib"),
               "floor s": seconds["floor"],
               "PFLlib / fedkd": seconds["PFLlib"] / seconds["fedkd"] if pfllib else None,
               "fedkd / floor": seconds["fedkd"] / seconds["floor"],
               "PFLlib / floor": seconds["PFLlib"] / seconds["floor"] if pfllib else None,
               "fedkd samples/s": samples / seconds["fedkd"],
               "floor GFLOP/s": samples * flops / seconds["floor"] / 1e9,
               "load (1 min)": os.getloadavg()[0]}
        print(", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items() if v is not None))
        rows.append(row)
    steady = rows[1:] or rows
    median = {key: statistics.median(row[key] for row in steady) for key in rows[0] if rows[0][key] is not None}
    summary = [f"fedkd's round is {median['PFLlib / fedkd']:.2f}x as fast as PFLlib's; the floor (forward, backward "
               f"and the SGD update on ready batches, nothing else) is {median['PFLlib / floor']:.2f}x as fast as "
               f"PFLlib's, the most any FedAvg can gain on it here, and fedkd spends {median['fedkd / floor']:.2f}x "
               f"the floor (medians of rounds {steady[0]['round']}-{steady[-1]['round']})"] if pfllib else [
               f"fedkd's round takes {median['fedkd / floor']:.2f}x the floor (forward, backward and the SGD update "
               f"on ready batches, nothing else; medians of rounds {steady[0]['round']}-{steady[-1]['round']})"]
    floor_share = 100 * median["floor GFLOP/s"] / max(ceiling.values())
    summary.append(f"the floor runs at {median['floor GFLOP/s']:.1f} GFLOP/s, {floor_share:.0f}% of the best "
                   f"large-kernel rate measured alongside (matmul {ceiling['matmul']:.1f}, convolution "
                   f"{ceiling['conv']:.1f} GFLOP/s): at batch 10 the kernels themselves are small")
    for sentence in summary:
        print(sentence)
    if not args.no_save:
        where = ("PFLlib's own MNIST split (its generate_MNIST.py, Dir(0.1), drawn by its code)" if args.pfllib
                 else f"the split in {split.name}" if split else "our Dir(0.1) split of MNIST (seed 0)")
        performance.save_result(
            "fedavg_round", "One FedAvg round (PFLlib's configuration)", [
                {key: (round(value, 2) if isinstance(value, float) else value) for key, value in row.items()}
                for row in rows], started=started,
            beside_note=args.beside,
            note=f"FedAvgCNN on {where}: {data.num_clients} clients, all selected, {samples:,} training samples, "
                 f"batch {TRAIN.batch_size}, SGD lr {TRAIN.lr} without momentum, one local epoch, fp32, "
                 f"{torch.get_num_threads()} thread(s); evaluation not timed (round 1 includes warm-up). "
                 f"Each round times fedkd's round, " + ("PFLlib's round (clientAVG on its own files) " if pfllib else "")
                 + f"and the floor one after another, in alternating order: the floor is the same number of "
                 f"steps (forward, cross-entropy, backward, SGD update) on batches made beforehand, in the "
                 f"tightest loop, the least any FedAvg implementation can spend on this CPU (PFLlib drops each "
                 f"client's last incomplete batch, so it runs up to {data.num_clients} fewer steps). "
                 f"Work: {flops / 1e6:.1f} MFLOP per training sample (forward + backward).",
            extra={"order": 2, "summary": summary,
                   "digits": {"fedkd s": 1, "PFLlib s": 1, "floor s": 1, "floor GFLOP/s": 1, "load (1 min)": 1}})


if __name__ == "__main__":
    main()
