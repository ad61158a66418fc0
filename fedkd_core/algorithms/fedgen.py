"""FedGen (Zhu, Hong, Zhou; ICML 2021): data-free knowledge distillation with a server-side
generator, as a baseline of the FedGMKD chapter.

Sources: the official code ``zhuangdizhu/FedGen`` ([FG]; HEAD dd5807c):
``FLAlgorithms/servers/serverpFedGen.py`` (``train_generator``, ``get_label_weights``),
``FLAlgorithms/users/userpFedGen.py`` (``train``), ``FLAlgorithms/trainmodel/generator.py``
(``Generator``, ``DiversityLoss``), ``FLAlgorithms/servers/serverbase.py``
(``init_ensemble_configs``, ``aggregate_parameters``), ``utils/model_config.py``
(``GENERATORCONFIGS``, ``RUNCONFIGS``), ``main.py`` (argument defaults); and FedGMKD §4.4's
settings for it ("MLP generator, hidden 512, trained 5 epochs per round, generative batch 32 =
0.5 × the training batch, α = β = 10 decayed by 0.98 per round").

**Generator** G(ε, y) = Linear(hidden → d)(ReLU(BN(Linear(noise + C → hidden)([ε ‖ onehot(y)]))))
([FG] ``Generator``, ``embedding=False``; ``GENERATORCONFIGS['cifar'] = (512, 32, 3, 10, 64)``:
hidden 512, latent 32, noise 64). Its output lives in the input space of the classifier
(``latent_layer_idx = -1``), here the model's ``features`` output (32-d for ``*_code32``), and is
read by ``model.head``. The noise is uniform on [0, 1) as in [FG] (``torch.rand``; the comment and
the paper say Gaussian: ``noise="normal"``).

**A round.** Clients download the global model and, once G has been trained (round 2 on; [FG]
``regularization = glob_iter > 0``), the generator's state. A client trains its copy with
([FG] ``UserpFedGen.train``)

    CE(model(x), y) + (B_gen / B) · α_t · CE(head(G(ε, ŷ)), ŷ)
                    + β_t · KL(softmax(head(G(ε, y))) ‖ softmax(model(x)))

with ŷ uniform over the classes (``available_labels``), G frozen and in eval mode, and
α_t = β_t = max(1e-4, 10 · 0.98^(t−1)) in round t (``exp_lr_scheduler(glob_iter, decay=0.98)``,
``glob_iter = t − 1``). It uploads its model and its label counts. The server then trains G
(:func:`train_generator_steps`, [FG] ``train_generator``) so that the clients' heads, each
weighted per label by its share of that label's samples (:func:`label_weights`), classify
G(ε, y) as y, plus the diversity term of [FG] (``DiversityLoss('l1')``, weight η = 1), and
averages the models by sample count ([FG] ``aggregate_parameters``).

**Settings and choices** (config fields; defaults with sources):

* α, β = 10, decay 0.98 (FedGMKD; [FG] ``RUNCONFIGS['mnist']`` ``generative_alpha/beta = 10``);
  generative batch 32 (FedGMKD; [FG] ``--gen_batch_size 32``).
* Generator optimiser: Adam, lr 3e-4, weight decay 1e-2, lr × 0.98 after every round ([FG]
  ``generative_optimizer``, ``ExponentialLR(gamma=0.98)``; lr and weight decay of
  ``RUNCONFIGS['mnist']``, the only 10-class image setting: [FG] has no CIFAR run configuration,
  ``get_dataset_name`` rejects CIFAR). The optimiser and scheduler persist across rounds.
* Generator steps per round: ``generator_epochs × generator_steps_per_epoch`` = 5 × 5. [FG]
  runs ``ensemble_epochs // n_teacher_iters`` = 50 // 5 = 10 "epochs" of ``n_teacher_iters`` = 5
  steps; FedGMKD's "5 epochs per global round" is read in that unit (25 steps). A step draws
  ``B`` labels uniformly from the labels some selected client holds (``qualified_labels``) with
  B = the clients' training batch size ([FG] ``train_generator(self.batch_size, ...)``).
* Server loss weights: teacher term 1 (``ensemble_alpha``), diversity η = 1 (``ensemble_eta``),
  adversarial student term off (``ensemble_beta = 0`` in every [FG] configuration, not
  implemented).

**Deviations from [FG]** (besides the project's shared loop): label counts are the client's
training-set histogram ([FG] counts the labels of the batches drawn in the round, starting from
1 per label, so a client lacking a label still gets a small weight for it); [FG]'s ``early_stop``
(20 local epochs) never triggers with its defaults and is omitted; [FG] averages only
parameters (BatchNorm statistics stay the server's), here the whole state as in every method of
the project; G is sent only in rounds where clients use it (round 2 on); an initial α or β of 0
switches its term off ([FG]'s 1e-4 floor would keep it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from ..aggregate import weighted_average
from ..randomness import SERVER
from ..training import cross_entropy_loss, train
from .shapes.base import Message, parameters_message
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

GENERATOR_PREFIX = "generator/"
LABEL_COUNTS = "label_counts"

# ε ~ U[0, 1) as [FG] generator.py (torch.rand), or N(0, I) as the paper writes.
NOISE = {"uniform": torch.rand, "normal": torch.randn}


@dataclass(frozen=True)
class FedGenConfig:
    generative_alpha: float = 10.0  # α, weight of CE on generated features (FedGMKD; [FG] RUNCONFIGS mnist)
    generative_beta: float = 10.0  # β, weight of the latent KL term (FedGMKD; [FG] RUNCONFIGS mnist)
    decay: float = 0.98  # α_t = β_t = max(1e-4, α · decay^(t-1)) ([FG] exp_lr_scheduler)
    gen_batch_size: int = 32  # generated samples per client step (FedGMKD; [FG] --gen_batch_size)
    hidden_dim: int = 512  # [FG] GENERATORCONFIGS['cifar']; FedGMKD "hidden dimension of 512"
    noise_dim: int = 64  # [FG] GENERATORCONFIGS['cifar']
    noise: str = "uniform"  # [FG] torch.rand
    generator_lr: float = 3e-4  # [FG] RUNCONFIGS mnist ensemble_lr (no CIFAR entry)
    generator_weight_decay: float = 1e-2  # [FG] RUNCONFIGS weight_decay
    generator_lr_decay: float = 0.98  # [FG] ExponentialLR(gamma=0.98), stepped once per round
    generator_epochs: int = 5  # FedGMKD "5 epochs per round" ([FG]: 50 // 5 = 10)
    generator_steps_per_epoch: int = 5  # [FG] n_teacher_iters
    generator_batch_size: int | None = None  # None: the clients' batch size ([FG] self.batch_size)
    diversity_weight: float = 1.0  # η ([FG] ensemble_eta)
    aggregation: str = "size"  # [FG] aggregate_parameters: user.train_samples / total_train
    untrained_client: str = "global"

    def __post_init__(self) -> None:
        for name in ("generative_alpha", "generative_beta", "generator_weight_decay", "diversity_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        for name in ("decay", "generator_lr_decay"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1] (got {getattr(self, name)})")
        for name in ("gen_batch_size", "hidden_dim", "noise_dim", "generator_steps_per_epoch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.generator_epochs < 0:
            raise ValueError(f"generator_epochs must be >= 0 (got {self.generator_epochs})")
        if self.generator_batch_size is not None and self.generator_batch_size < 2:
            raise ValueError(f"generator_batch_size must be >= 2 or None (got {self.generator_batch_size})")
        if not self.generator_lr > 0:
            raise ValueError(f"generator_lr must be > 0 (got {self.generator_lr})")
        check_choice(self.noise, NOISE, "noise")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


class Generator(nn.Module):
    """G(ε, y): [ε ‖ onehot(y)] → Linear(hidden) + BatchNorm1d + ReLU → Linear(latent) ([FG]
    ``Generator.build_network`` with one hidden layer and ``embedding=False``)."""

    def __init__(self, noise_dim: int, num_classes: int, hidden_dim: int, latent_dim: int):
        super().__init__()
        self.noise_dim, self.num_classes = noise_dim, num_classes
        self.hidden = nn.Sequential(nn.Linear(noise_dim + num_classes, hidden_dim), nn.BatchNorm1d(hidden_dim),
                                    nn.ReLU())
        self.representation = nn.Linear(hidden_dim, latent_dim)

    def forward(self, noise: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(labels, self.num_classes).to(noise.dtype)
        return self.representation(self.hidden(torch.cat([noise, onehot], dim=1)))


def feature_dim(model: nn.Module) -> int:
    """Width of the classifier's input (the generator's output): the first Linear of ``model.head``."""
    for module in model.head.modules():
        if isinstance(module, nn.Linear):
            return module.in_features
    raise ValueError("model.head must contain a Linear layer")


def generative_weight(initial: float, decay: float, round_index: int) -> float:
    """α_t (or β_t) in round t ≥ 1: max(1e-4, initial · decay^(t−1)) ([FG] ``exp_lr_scheduler(
    glob_iter, decay=0.98, init_lr=generative_alpha)`` with ``glob_iter = t − 1``). An initial
    weight of 0 switches the term off (in [FG] the floor would still give it 1e-4)."""
    if round_index < 1:
        raise ValueError(f"round_index must be >= 1 (got {round_index})")
    return max(1e-4, initial * decay ** (round_index - 1)) if initial > 0 else 0.0


def label_weights(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From (clients, C) label counts: the weight of client k for label y, counts[k, y] / Σ_k
    counts[k, y] (C, clients), and the labels some client holds ([FG] ``get_label_weights``:
    ``qualified_labels``). Labels nobody holds get weight 0."""
    counts = counts.double()
    totals = counts.sum(0)
    weights = (counts / totals.clamp_min(1.0)).T
    return weights.float(), torch.nonzero(totals > 0).flatten()


def diversity_loss(noise: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """exp(−mean_{i,j} d₂(ε_i, ε_j) · d₁(G_i, G_j)) with d₂ the mean squared and d₁ the mean
    absolute difference over dimensions ([FG] ``DiversityLoss(metric='l1')``)."""
    noise_distance = (noise.unsqueeze(0) - noise.unsqueeze(1)).pow(2).mean(2)
    output_distance = (output.unsqueeze(0) - output.unsqueeze(1)).abs().mean(2)
    return torch.exp(-(noise_distance * output_distance).mean())


def teacher_loss(heads: list[dict[str, torch.Tensor]], head: nn.Module, features: torch.Tensor,
                 labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ_k mean_i weights[y_i, k] · CE(head_k(features_i), y_i): how well the clients' heads,
    each counted by its share of label y_i, classify the generated features ([FG]
    ``teacher_loss``). ``heads`` are the clients' head parameters, run through ``head``."""
    loss = features.new_zeros(())
    for k, parameters in enumerate(heads):
        logits = functional_call(head, parameters, (features,))
        loss = loss + (F.cross_entropy(logits, labels, reduction="none") * weights[labels, k]).mean()
    return loss


def device_generator(rng: np.random.Generator, device: torch.device) -> torch.Generator:
    """A torch generator on ``device`` seeded from a party's numpy stream."""
    return torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))


class FedGen(FromGlobal):
    Config = FedGenConfig

    def __init__(self, config: FedGenConfig, ctx):
        super().__init__(config, ctx)
        self.num_classes = ctx.data.num_classes
        self.latent_dim = feature_dim(self.model)
        if (config.generator_batch_size or ctx.train.batch_size) < 2:  # BatchNorm1d trains on >= 2 samples
            raise ValueError(f"generator_batch_size must be >= 2 (None takes the clients' batch_size, "
                             f"{ctx.train.batch_size})")
        with torch.random.fork_rng(devices=[]):  # G's initial weights from the server's round-0 stream
            torch.manual_seed(int(self.rng(SERVER, "server").integers(2**62)))
            self.generative_model = self.new_generator()
        self.client_generator = self.new_generator()  # scratch: a client's copy of G
        self.generator_optimizer = torch.optim.Adam(self.generative_model.parameters(), lr=config.generator_lr,
                                                    betas=(0.9, 0.999), eps=1e-8,
                                                    weight_decay=config.generator_weight_decay)
        self.generator_schedule = torch.optim.lr_scheduler.ExponentialLR(self.generator_optimizer,
                                                                         gamma=config.generator_lr_decay)
        self.generator_trained = False
        self.last_generator_loss: dict[str, float] = {}

    def new_generator(self) -> Generator:
        c = self.config
        return Generator(c.noise_dim, self.num_classes, c.hidden_dim, self.latent_dim).to(self.ctx.device)

    def noise(self, count: int, generator: torch.Generator) -> torch.Tensor:
        return NOISE[self.config.noise](count, self.config.noise_dim, generator=generator, device=self.ctx.device)

    # --- the steps ------------------------------------------------------------------------
    def download(self, client: int) -> Message:
        message = parameters_message(self.model)
        if self.generator_trained:  # G is used from round 2 on ([FG] regularization = glob_iter > 0)
            message.update({GENERATOR_PREFIX + name: t.detach().clone()
                            for name, t in self.generative_model.state_dict().items()})
        return message

    def client_update(self, client: int, message: Message) -> Message:
        model_state = {name: t for name, t in message.items() if not name.startswith(GENERATOR_PREFIX)}
        generator_state = {name[len(GENERATOR_PREFIX):]: t for name, t in message.items()
                           if name.startswith(GENERATOR_PREFIX)}
        self.worker.load_state_dict(model_state)
        loss_fn = cross_entropy_loss  # round 1: G untrained, plain CE ([FG] regularization=False)
        if generator_state:
            self.client_generator.load_state_dict(generator_state)
            loss_fn = self.generator_regularised_loss(client, self.client_generator.eval().requires_grad_(False))
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=loss_fn)
        self.personal[client] = frozen_copy(self.worker)
        return {**parameters_message(self.worker), LABEL_COUNTS: self.label_counts(client)}

    def label_counts(self, client: int) -> torch.Tensor:
        labels = self.ctx.data.dataset.y_train[torch.as_tensor(np.asarray(self.ctx.data.client_train[client]))]
        return torch.bincount(labels.long(), minlength=self.num_classes)

    def generator_regularised_loss(self, client: int, generator: Generator):
        """[FG] ``UserpFedGen.train`` with regularisation: CE + (B_gen/B)·α_t·CE on generated
        features of uniformly drawn labels + β_t·KL(G-conditioned prediction ‖ prediction on x)."""
        c = self.config
        alpha = generative_weight(c.generative_alpha, c.decay, self.round)
        beta = generative_weight(c.generative_beta, c.decay, self.round)
        ratio = c.gen_batch_size / self.ctx.train.batch_size
        draws = device_generator(self.rng(client), self.ctx.device)

        def loss_fn(model, batch):
            logits = model(batch.x)
            with torch.no_grad():
                same_label = generator(self.noise(len(batch.y), draws), batch.y)
                target = F.softmax(model.head(same_label).float(), dim=1)
            latent = F.kl_div(F.log_softmax(logits.float(), dim=1), target, reduction="batchmean")
            sampled = torch.randint(self.num_classes, (c.gen_batch_size,), generator=draws, device=self.ctx.device)
            with torch.no_grad():
                features = generator(self.noise(c.gen_batch_size, draws), sampled)
            generated = F.cross_entropy(model.head(features).float(), sampled)
            return F.cross_entropy(logits.float(), batch.y) + ratio * alpha * generated + beta * latent

        return loss_fn

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        counts = torch.stack([uploads[k][LABEL_COUNTS] for k in clients]).to(self.ctx.device)
        models = [{n: t for n, t in uploads[k].items() if n != LABEL_COUNTS} for k in clients]
        heads = [{n[len("head."):]: t.to(self.ctx.device) for n, t in m.items() if n.startswith("head.")}
                 for m in models]
        self.train_generator(heads, counts)
        weights = AGGREGATION_WEIGHTS[self.config.aggregation]([self.ctx.client_size(k) for k in clients])
        self.model.load_state_dict(weighted_average(models, weights))

    def train_generator(self, heads: list[dict[str, torch.Tensor]], counts: torch.Tensor) -> None:
        """[FG] ``train_generator``: the configured number of Adam steps on the label-weighted
        teacher loss of the clients' heads plus the diversity term, then one lr decay step."""
        c = self.config
        weights, qualified = label_weights(counts)
        steps = c.generator_epochs * c.generator_steps_per_epoch
        if len(qualified) and steps:
            draws = device_generator(self.rng(SERVER, "server"), self.ctx.device)
            self.last_generator_loss = train_generator_steps(
                self.generative_model, self.generator_optimizer, heads, self.model.head, weights, qualified, steps,
                c.generator_batch_size or self.ctx.train.batch_size, c.diversity_weight,
                lambda count: self.noise(count, draws), draws)
            self.generator_trained = True
        self.generator_schedule.step()

    def round_metrics(self) -> dict:
        return dict(self.last_generator_loss)


def train_generator_steps(generator: Generator, optimizer: torch.optim.Optimizer, heads, head: nn.Module,
                          weights: torch.Tensor, qualified: torch.Tensor, steps: int, batch_size: int,
                          diversity_weight: float, noise, draws: torch.Generator) -> dict[str, float]:
    """``steps`` Adam steps of G on teacher loss + η·diversity; the mean of both terms."""
    generator.train()
    totals = torch.zeros(2, device=qualified.device)
    for _ in range(steps):
        labels = qualified[torch.randint(len(qualified), (batch_size,), generator=draws, device=qualified.device)]
        eps = noise(batch_size)
        features = generator(eps, labels)
        teacher = teacher_loss(heads, head, features, labels, weights)
        diversity = diversity_loss(eps, features)
        optimizer.zero_grad(set_to_none=True)
        (teacher + diversity_weight * diversity).backward()
        optimizer.step()
        totals += torch.stack([teacher.detach(), diversity.detach()])
    optimizer.zero_grad(set_to_none=True)  # G keeps no gradients between rounds (memory)
    teacher_mean, diversity_mean = (totals / steps).tolist()
    return {"generator_teacher_loss": teacher_mean, "generator_diversity_loss": diversity_mean}
