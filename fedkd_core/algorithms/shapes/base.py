"""What every algorithm is: a set of steps the simulation calls each round.

A round is: the server's ``download`` message to every selected client, the client's work in
``client_update`` (which returns its upload), the server's work in ``server_update`` and, for
methods with a second exchange in the round (KnFu, FedMD: fused soft labels back to the clients),
a ``reply`` the client consumes in ``client_finish``. Messages are dicts of tensors; the
simulation counts their bytes. Evaluation asks for ``personal_model(k)`` (the model client k
would use) and ``global_model()`` (None for methods without one).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import nn

from ...federation import FederatedData
from ...models import InputShape, SplitModel, make_model
from ...randomness import party_generator, party_rng
from ...training import OptimizerStates, TrainConfig

Message = dict[str, torch.Tensor]


@dataclass
class Context:
    """What an algorithm may use: the data, the model recipe, training settings, the seed."""

    data: FederatedData
    model_name: str
    train: TrainConfig  # this round's settings (set by Algorithm.begin_round from run_train)
    device: torch.device
    seed: int
    run_train: TrainConfig | None = None  # the run's settings, before any lr decay; ``train`` when not given

    def __post_init__(self) -> None:
        if self.run_train is None:
            self.run_train = self.train

    @cached_property
    def initial_model(self) -> SplitModel:
        """The seed's initial model; every client and the server start from a copy of it."""
        shape = InputShape(self.data.dataset.in_channels, self.data.dataset.image_size, self.data.num_classes)
        model = make_model(self.model_name, shape, seed=self.seed)
        return model.to(self.device).to(memory_format=torch.channels_last)

    def new_model(self) -> SplitModel:
        return copy.deepcopy(self.initial_model)

    def client_size(self, client: int) -> int:
        return len(self.data.client_train[client])


def parameters_message(model: nn.Module, prefix: str = "") -> Message:
    """The model's state (parameters and buffers) as a message, detached copies."""
    return {name: t.detach().clone() for name, t in model.state_dict().items() if name.startswith(prefix)}


def message_bytes(message: Message | None) -> int:
    """Bytes a message occupies on the wire: the sum of its tensors' storage."""
    if not message:
        return 0
    return sum(t.numel() * t.element_size() for t in message.values())


class Algorithm:
    """Base class. Subclasses set ``Config`` (a frozen dataclass) and override the steps.

    ``CLIENT_STATE`` names the attributes that hold what a client keeps between rounds (a
    ``PersonalModels``, an ``OptimizerStates``, or a dict from client to a model or a tensor).
    Everything else is the server's or scratch. ``client_state`` / ``load_client_state`` move one client's part through a
    message, so a client's steps can run on another copy of the algorithm, in another process
    (fedkd_core.flower), and give the same numbers.
    """

    Config: type = type(None)
    CLIENT_STATE: tuple[str, ...] = ()
    NEEDS: frozenset[str] = frozenset()  # what a run must offer (fedkd_core.contracts.NEEDS), e.g. {"transfer_set"}

    def __init__(self, config, ctx: Context):
        self.config = config
        self.ctx = ctx
        self.round = 0

    def begin_round(self, round_index: int) -> None:
        self.round = round_index
        self.ctx.train = self.ctx.run_train.for_round(round_index)  # the local lr after this round's decays

    def generator(self, party: int, phase: str = "update") -> torch.Generator:
        """This round's torch generator of ``party`` (a client, or SERVER) in ``phase`` ("update"
        for client_update, "finish" for client_finish, "server" for server_update): its own
        stream, so parties can run in any order or place (fedkd_core.randomness)."""
        return party_generator(self.ctx.seed, self.round, party, phase)

    def rng(self, party: int, phase: str = "update") -> np.random.Generator:
        """This round's numpy generator of ``party`` in ``phase``."""
        return party_rng(self.ctx.seed, self.round, party, phase)

    def download(self, client: int) -> Message:
        return {}

    def client_update(self, client: int, message: Message) -> Message:
        raise NotImplementedError

    def server_update(self, uploads: dict[int, Message]) -> None:
        pass

    def reply(self, client: int) -> Message | None:
        return None

    def client_finish(self, client: int, message: Message) -> None:
        pass

    def personal_model(self, client: int) -> nn.Module:
        raise NotImplementedError

    def global_model(self) -> nn.Module | None:
        return None

    def client_state(self, client: int) -> Message:
        """What ``client`` keeps between rounds, as a message (``field/name`` -> tensor)."""
        state: Message = {}
        for field in self.CLIENT_STATE:
            holder = getattr(self, field)
            if client not in holder:
                continue
            value = holder[client]
            if isinstance(value, nn.Module):
                state.update({f"{field}/{name}": t.detach().clone() for name, t in value.state_dict().items()})
            elif isinstance(value, dict):  # an optimiser's state (OptimizerStates)
                state.update({f"{field}/{name}": t.detach().clone() for name, t in value.items()})
            else:
                state[field] = value.detach().clone()
        return state

    def load_client_state(self, client: int, state: Message) -> None:
        """Restore what ``client_state(client)`` returned (on this or another copy)."""
        for field in self.CLIENT_STATE:
            holder, prefix = getattr(self, field), f"{field}/"
            if field in state:
                holder[client] = state[field].clone()
                continue
            weights = {name[len(prefix):]: t for name, t in state.items() if name.startswith(prefix)}
            if not weights:
                continue
            if isinstance(holder, OptimizerStates):
                holder[client] = {name: t.clone() for name, t in weights.items()}
            elif isinstance(holder, PersonalModels):
                holder[client].load_state_dict(weights)
            else:  # a dict of frozen models (a client's teacher or history)
                model = self.ctx.new_model()
                model.load_state_dict(weights)
                holder[client] = model.eval().requires_grad_(False)

    def drop_client_state(self, client: int) -> None:
        """Forget ``client``'s state here (a copy serving many clients keeps none of them)."""
        for field in self.CLIENT_STATE:
            holder = getattr(self, field)
            if client in holder:
                del holder[client]

    def round_metrics(self) -> dict:
        """Plain-data diagnostics of the last round, stored in the record's history (e.g. FedUA's
        teacher weights); none by default."""
        return {}


class PersonalModels:
    """One resident model per client, created from the initial model on first use."""

    def __init__(self, ctx: Context):
        self._ctx = ctx
        self._models: dict[int, SplitModel] = {}

    def __getitem__(self, client: int) -> SplitModel:
        if client not in self._models:
            self._models[client] = self._ctx.new_model()
        return self._models[client]

    def __contains__(self, client: int) -> bool:
        return client in self._models

    def __delitem__(self, client: int) -> None:
        del self._models[client]
