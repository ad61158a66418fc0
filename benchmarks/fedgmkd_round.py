"""Seconds of a FedGMKD round against a FedAvg round, with FedGMKD's mixtures fitted by scikit-learn
on the host or by torch on the run's device.

    python benchmarks/fedgmkd_round.py                                  # CPU, the quick profile's run
    python benchmarks/fedgmkd_round.py --device cuda --model resnet18_code32 --samples 500

The run is the FedGMKD chapter's (notebooks/params/quick/fedgmkd.yaml, the paper profile with
``--model resnet18_code32 --samples 500``): CIFAR-10, Dir(0.5), ``--clients`` clients of
``--samples`` images, all selected, 3 local epochs of Adam (lr 1e-3, batch 64, drop_last), fp32.
FedAvg and FedGMKD (the paper's variant: per-class GMMs of 1..6 full-covariance components by
BIC) with ``mixture_backend`` "sklearn" (today's records) and "torch" (``fedkd_core.mixture``), each
for ``--rounds`` rounds from the same seed, taking turns round by round (a change of load beside
falls on all three alike); each round (downloads, every client's training and
knowledge, uploads, server step) is timed, evaluation is not. Round 1 is CE alone for FedGMKD and
carries the warm-up; the rows are the mean of the rounds after the first (round 2 on: Eq. 13 with
the downloaded knowledge). "mixture fits" is the time inside ``class_prototypes`` (the per-class
fits, soft predictions and copies), "x FedAvg" the round's time over FedAvg's. The torch
backend's prototypes are compared with scikit-learn's on the same round's features (the largest
difference, relative to the largest prototype entry).

Not a test: the seconds depend on the machine and on what runs beside it, which
benchmarks/results/fedgmkd_round-<machine>.json names with them (the book's Performance page
shows it; ``--no-save`` only prints).
"""

from __future__ import annotations

import argparse
import time

import torch

from fedkd_core import performance
from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms import fedgmkd as fedgmkd_module
from fedkd_core.data import load_dataset
from fedkd_core.experiment import _run_round
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.results import device_name
from fedkd_core.training import TrainConfig

RUNS = (("FedAvg", "fedavg", {}),
        ("FedGMKD, sklearn mixtures", "fedgmkd", {"variant": "paper", "mixture_backend": "sklearn"}),
        ("FedGMKD, torch mixtures", "fedgmkd", {"variant": "paper", "mixture_backend": "torch"}))


class FitClock:
    """Seconds spent in ``fedgmkd.class_prototypes`` (patched in the module the algorithm calls),
    and each call's inputs and output when ``keep`` is set."""

    def __init__(self, device: torch.device, keep: bool = False):
        self.seconds, self.calls, self.device, self.keep = 0.0, [], device, keep
        self.original = fedgmkd_module.class_prototypes

    def __enter__(self):
        def timed(*args, **kwargs):
            synchronise(self.device)
            began = time.perf_counter()
            out = self.original(*args, **kwargs)
            synchronise(self.device)
            self.seconds += time.perf_counter() - began
            if self.keep:
                self.calls.append((args, kwargs, out))
            return out

        fedgmkd_module.class_prototypes = timed
        return self

    def __exit__(self, *exc):
        fedgmkd_module.class_prototypes = self.original


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_runs(ctxs: dict, rounds: int, device) -> dict[str, tuple[list[dict], list]]:
    """Per method: per round, seconds and seconds in the mixture fits; and its last round's fit
    calls. The methods take turns round by round, so a change in the machine's load meanwhile falls
    on all of them alike."""
    methods = {label: algorithm_class(algorithm)(algorithm_config(algorithm, params), ctxs[label])
               for label, algorithm, params in RUNS}
    out = {label: ([], []) for label in methods}
    for round_index in range(1, rounds + 1):
        for label, method in methods.items():
            clients = list(range(method.ctx.data.num_clients))
            with FitClock(device, keep=round_index == rounds) as clock:
                synchronise(device)
                began = time.perf_counter()
                _run_round(method, round_index, clients)
                synchronise(device)
                seconds = time.perf_counter() - began
            out[label][0].append({"round": round_index, "seconds": seconds, "fits": clock.seconds})
            out[label][1][:] = clock.calls
            print(f"{label}: round {round_index}: {seconds:.2f} s, mixture fits {clock.seconds:.2f} s", flush=True)
    return out


def prototype_agreement(calls) -> float:
    """The largest |torch − scikit-learn| prototype entry over a round's fits, relative to the
    largest prototype entry, refitting each call's features with scikit-learn."""
    worst = 0.0
    for args, kwargs, out in calls:
        reference = fedgmkd_module.class_prototypes(*args, **{**kwargs, "mixture_backend": "sklearn"})
        scale = float(reference.prototypes.abs().max())
        worst = max(worst, float((out.prototypes - reference.prototypes).abs().max()) / scale)
    return worst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--samples", type=int, default=200, help="images per client (default 200)")
    parser.add_argument("--model", default="cnn5_code32")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per method; the first is warm-up (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (default 1)")
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first is warm-up)")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    started = performance.beside_now()
    torch.set_num_threads(args.threads)
    train = TrainConfig(epochs=3, batch_size=64, lr=1e-3, optimizer="adam", mixed_precision=False, drop_last=True)
    data_config = DataConfig("cifar10", num_clients=args.clients, partition="dirichlet", alpha=0.5,
                             samples_per_client=args.samples, local_test_size=1)
    data = build_federated_data(data_config, seed=0, dataset=load_dataset("cifar10"))
    print(f"{device_name(device)}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"{args.clients} clients x {args.samples} CIFAR-10 images, {args.model}", flush=True)

    results = time_runs({label: Context(data=data, model_name=args.model, train=train, device=device, seed=0)
                         for label, _, _ in RUNS}, args.rounds, device)
    fedavg = sum(r["seconds"] for r in results["FedAvg"][0][1:]) / (args.rounds - 1)
    agreement = prototype_agreement(results["FedGMKD, torch mixtures"][1])
    rows = []
    for label, (per_round, _) in results.items():
        timed = per_round[1:]
        seconds = sum(r["seconds"] for r in timed) / len(timed)
        fits = sum(r["fits"] for r in timed) / len(timed)
        rows.append({"method": label, "device": device.type, "seconds per round": round(seconds, 2),
                     "mixture fits per round": round(fits, 2) if label != "FedAvg" else None,
                     "first round": round(per_round[0]["seconds"], 2),
                     "x FedAvg": round(seconds / fedavg, 2)})
        print(rows[-1], flush=True)
    print(f"torch vs scikit-learn prototypes, last round: largest difference {agreement:.1e} of the largest entry")
    if not args.no_save:
        name = "fedgmkd_round" if device.type == "cpu" else f"fedgmkd_round_{device.type}"
        performance.save_result(
            name, f"A FedGMKD round against a FedAvg round ({device.type.upper()})", rows, started=started,
            beside_note=args.beside,
            note=f"CIFAR-10 Dir(0.5), {args.clients} clients x {args.samples} images, {args.model}, 3 local epochs "
                 f"of Adam (batch 64), fp32, all clients selected; mean of rounds 2-{args.rounds} (round 1, CE "
                 "alone for FedGMKD, carries the warm-up: 'first round'). FedGMKD fits per client and class "
                 "GMMs of 1-6 full-covariance components and keeps the BIC-best: 'sklearn' one fit at a time "
                 "on the host CPU (the committed records), 'torch' all of a client's fits as one batched EM on "
                 f"the run's device (fedkd_core.mixture). The torch prototypes of the last round differ from "
                 f"scikit-learn's refit of the same features by at most {agreement:.1e} of the largest entry.",
            extra={"order": 4, "digits": {"seconds per round": 2, "mixture fits per round": 2, "first round": 2,
                                          "x FedAvg": 2}})


if __name__ == "__main__":
    main()
