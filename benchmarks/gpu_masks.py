"""Issue 60 item 4 on a real GPU: host-drawn dropout masks are the CPU's; a round of LG-FedAvg on
the pFedSD CNN on CPU and on CUDA differs only by rounding with them, and by other masks without.

On the lent GPU machine (README, "On a GPU"), with a small fashion_mnist.npz (6,000 training and
2,000 test images of the real one) and finch's wheel in .gpu/masks/, carried:
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/masks/*.whl
    PYTHONPATH=/tmp/site DEV=cuda FEDKD_DATA=$PWD/.gpu/masks python3 benchmarks/gpu_masks.py
Writes $OUT/gpu_masks.json (committed as benchmarks/results/gpu_masks-nvidia-h200.json; 44 s on an
H200 machine, 2026-11-28). DEV=cpu runs the same script without a GPU (both sides on the CPU).
"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import numpy as np
import torch
from fedkd_core import models
from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.experiment import ExperimentConfig, _run_round, simulate
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.models import HostDropout2d
from fedkd_core.precision import reproducible
from fedkd_core.randomness import party_randomness
from fedkd_core.training import TrainConfig

DEV = os.environ.get("DEV", "cuda")
out = {"gpu": torch.cuda.get_device_name(0) if DEV == "cuda" else DEV, "torch": torch.__version__}
x = torch.ones(64, 64, 8, 8)
masks = {}
for name, module, dev in [("host_cpu", HostDropout2d(0.5), "cpu"), ("host_cuda", HostDropout2d(0.5), DEV),
                          ("torch_cpu", torch.nn.Dropout2d(0.5), "cpu"), ("torch_cuda", torch.nn.Dropout2d(0.5), DEV)]:
    with party_randomness(0, 1, 0, "update"):
        masks[name] = module.train()(x.to(dev)).cpu()
out["host_cuda_equals_cpu"] = torch.equal(masks["host_cuda"], masks["host_cpu"])
out["host_cpu_equals_torch_cpu"] = torch.equal(masks["host_cpu"], masks["torch_cpu"])
out["torch_cuda_equals_cpu"] = torch.equal(masks["torch_cuda"], masks["host_cpu"])
out["torch_cuda_channels_agreeing"] = float((masks["torch_cuda"][:, :, 0, 0] == masks["host_cpu"][:, :, 0, 0]).float().mean())

config = ExperimentConfig(algorithm="lg_fedavg", model="pfedsd_cnn_mnist", rounds=5, seed=0, participation=1.0,
                          data=DataConfig("fashion_mnist", num_clients=5, partition="pathological", classes_per_client=2,
                                          samples_per_client=300, local_test_size=100),
                          train=TrainConfig(epochs=2, batch_size=64, lr=0.01, momentum=0.9, weight_decay=1e-5,
                                            mixed_precision=False))

def one_round(device):
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=torch.device(device), seed=config.seed)
    alg = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    with torch.random.fork_rng(devices=[0] if DEV == "cuda" else []), reproducible(torch.device(device)):
        torch.manual_seed(1)
        _run_round(alg, 1, list(range(5)))
    body = {f"{k}:{n}": t.detach().cpu().double() for k in range(5) for n, t in alg.models[k].state_dict().items()}
    return {**{n: t.cpu().double() for n, t in alg.shared.items()}, **body}

def compare(label):
    t = time.time()
    cpu, cuda = one_round("cpu"), one_round(DEV)
    diff = max(float((cpu[n] - cuda[n]).abs().max()) for n in cpu)
    scale = max(float(cpu[n].abs().max()) for n in cpu)
    h_cpu = simulate(config, device=torch.device("cpu"), progress=False)["history"]
    h_cuda = simulate(config, device=torch.device(DEV), progress=False)["history"]
    out[label] = {"round1_max_abs_weight_diff": diff, "weight_scale": scale,
                  "alma_cpu": [r["alma"] for r in h_cpu], "alma_cuda": [r["alma"] for r in h_cuda],
                  "clients_differing_final": int(sum(a != b for a, b in zip(h_cpu[-1]["client_accuracies"], h_cuda[-1]["client_accuracies"]))),
                  "seconds": time.time() - t}
    print(label, out[label], flush=True)

compare("host_masks")
models.host_drawn = lambda m: m
compare("device_masks")
print(json.dumps(out, indent=1))
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
open(os.path.join(os.environ.get("OUT", "/tmp"), "gpu_masks.json"), "w").write(json.dumps(out, indent=1))
