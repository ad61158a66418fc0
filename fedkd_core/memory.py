"""What a run holds in (device) memory, counted from the objects that hold it (issue 32 item 3).

A GPU run keeps, besides the resident dataset (:meth:`fedkd_core.data.ImageDataset.on`), every
client's state between rounds (personal models, kept optimisers, teachers, histories) and, at the
server's step, every upload. :func:`held_bytes` counts the distinct tensor storages an algorithm
(and the uploads) reach, so the memory per client is read off the objects, exactly, on a CPU run:
no allocator, no GPU needed. Activations and gradients of the one client training at a time come
on top (a batch's worth, small beside 100 clients' states).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from .algorithms.shapes.base import PersonalModels
from .training import OptimizerStates

SHARED = ("ctx",)  # the run's context: the dataset and initial model, counted apart (not per client)


def _tensors(value, seen: set[int]):
    """Every tensor ``value`` reaches through modules, optimisers, containers and attributes."""
    if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, nn.Module):
        yield from value.state_dict(keep_vars=True).values()
        yield from (p.grad for p in value.parameters() if p.grad is not None)
    elif isinstance(value, torch.optim.Optimizer):
        for state in value.state.values():
            yield from _tensors(state, seen)
    elif isinstance(value, PersonalModels):
        yield from _tensors(value._models, seen)
    elif isinstance(value, OptimizerStates):
        yield from _tensors(value._states, seen)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, seen)
    elif isinstance(value, (list, tuple, set)):
        for item in value:
            yield from _tensors(item, seen)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("fedkd_core"):
        for name, item in vars(value).items():
            if name not in SHARED:
                yield from _tensors(item, seen)


def held_storages(*objects) -> dict[int, int]:
    """The distinct tensor storages ``objects`` hold: address -> bytes (an algorithm's ``ctx`` is
    left out)."""
    storages = {}
    for t in (t for obj in objects for t in _tensors(obj, set())):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return storages


def held_bytes(*objects) -> int:
    """Bytes of the distinct tensor storages ``objects`` hold (a storage shared by several tensors
    counts once; an algorithm's ``ctx`` is left out)."""
    return sum(held_storages(*objects).values())


def model_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def bytes_at_server_step(config, clients: int, rounds: int = 2) -> dict:
    """Run ``rounds`` rounds of ``config`` with ``clients`` clients, all selected, on the CPU; the
    most bytes the algorithm and the round's uploads hold when the server's step begins, and the
    bytes of one model."""
    from .algorithms import Context, algorithm_class, algorithm_config
    from .experiment import _run_round
    from .federation import build_federated_data

    config = replace(config, data=replace(config.data, num_clients=clients))
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=torch.device("cpu"), seed=config.seed)
    algorithm = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    held: list[int] = []
    server_update = algorithm.server_update

    def counted(uploads):
        held.append(held_bytes(algorithm, uploads))
        return server_update(uploads)

    algorithm.server_update = counted
    for round_index in range(1, rounds + 1):
        _run_round(algorithm, round_index, list(range(clients)))
    return {"server_step": max(held), "model": model_bytes(ctx.initial_model)}


def models_per_client(config, clients: tuple[int, int] = (2, 4), rounds: int = 2) -> float:
    """Models' worth of memory each client adds at the server's step: the growth of
    :func:`bytes_at_server_step` from ``clients[0]`` to ``clients[1]`` clients, per client, in
    model sizes (its models, kept optimiser and other states, its upload)."""
    few, many = (bytes_at_server_step(config, n, rounds) for n in clients)
    return (many["server_step"] - few["server_step"]) / (clients[1] - clients[0]) / few["model"]


def resident_dataset_bytes(dataset) -> int:
    """Bytes of a dataset made resident on a device: both splits in float32, labels in int64."""
    images = (len(dataset.y_train) + len(dataset.y_test)) * dataset.in_channels * dataset.image_size ** 2
    return 4 * images + 8 * (len(dataset.y_train) + len(dataset.y_test))
