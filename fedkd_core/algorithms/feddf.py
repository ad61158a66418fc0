"""FedDF as FedUA compares with it: FedAvg, then ensemble distillation on an unlabelled server set.

One round (FedBE's "vanilla distillation", which FedUA's §4.1b describes: Lin et al. 2020's idea
with FedBE's server recipe): clients train from the global model and upload it; the server
averages the uploads (sample-size weights) into the *student*, runs the unlabelled server set U
through every upload (the *teachers*, eval mode, no augmentation), forms per-sample ensemble
targets softmax(sum_k w_k(x) l_k(x) / T) with uniform weights w_k = 1/K, and trains the student
on them with KL for ``server_epochs`` epochs of SGD. The student is the next global model.

``sample_ratio`` < 1 keeps only part of U, chosen by ``selection`` ("bald": the samples on which
the teachers disagree most; "random"): FedUA's Table 1 ablation. :class:`~.fedua.FedUA` changes
the weights (``teacher_weights``) and uploads the clients' feature densities.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..distill import kd_kl
from ..feature_density import MESSAGE_KEYS
from ..training import Batch, TrainConfig, predict_features, train
from ..uncertainty import bald_scores, check_selection, ensemble_targets, entropy, select_samples
from ..randomness import SERVER
from .shapes.base import Message
from .fedavg import FedAvg


@dataclass(frozen=True)
class FedDFConfig:
    """Server distillation settings (FedUA §4.1b: 20 epochs, SGD, batch 128, KL).

    server_lr / server_momentum / server_weight_decay: FedBE's hard-coded server SGD
        (``models/Update.py ServerUpdate``: lr 1e-3, momentum 0.9, weight decay 1e-5).
    temperature: T of the ensemble targets and of the student's softmax (FedDF: 1).
    sample_ratio / selection: the share of U distilled on and how it is chosen (1: all of U).
    """

    server_epochs: int = 20
    server_batch_size: int = 128
    server_lr: float = 1e-3
    server_momentum: float = 0.9
    server_weight_decay: float = 1e-5
    temperature: float = 1.0
    sample_ratio: float = 1.0
    selection: str = "bald"

    def __post_init__(self) -> None:
        if self.server_epochs < 0:
            raise ValueError(f"server_epochs must be >= 0 (got {self.server_epochs})")
        if not 0.0 < self.sample_ratio <= 1.0:
            raise ValueError(f"sample_ratio must be in (0, 1] (got {self.sample_ratio})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        check_selection(self.selection)

    def server_train(self, client_train: TrainConfig) -> TrainConfig:
        """The student's optimiser settings (precision as the clients', never augmented)."""
        return TrainConfig(epochs=self.server_epochs, batch_size=self.server_batch_size, lr=self.server_lr,
                           momentum=self.server_momentum, weight_decay=self.server_weight_decay, optimizer="sgd",
                           mixed_precision=client_train.mixed_precision, augment="none")


def model_state(message: Message) -> Message:
    """The model's part of an upload (without a feature density riding along)."""
    return {name: tensor for name, tensor in message.items() if name not in MESSAGE_KEYS}


@dataclass(frozen=True)
class TeacherOutputs:
    clients: list[int]
    features: torch.Tensor  # (K, N, d) float32 penultimate features on U
    logits: torch.Tensor  # (K, N, C) float32


class FedDF(FedAvg):
    """The global model is the distilled student; ``round_metrics`` says what the server did."""

    Config = FedDFConfig
    NEEDS = frozenset({"transfer_set"})  # the unlabelled set the server distils on (FedUA inherits it)

    def __init__(self, config: FedDFConfig, ctx):
        super().__init__(config, ctx)
        self.teacher = ctx.new_model()
        self.metrics: dict = {}

    def server_update(self, uploads: dict[int, Message]) -> None:
        super().server_update({k: model_state(m) for k, m in uploads.items()})  # the student's start: FedAvg
        self.metrics = {}
        if self.config.server_epochs == 0:
            return
        outputs = self.teacher_outputs(uploads)
        weights = self.teacher_weights(outputs, uploads)
        targets = ensemble_targets(outputs.logits, weights, self.config.temperature)
        scores = bald_scores(torch.softmax(outputs.logits.double(), dim=-1))
        kept = select_samples(scores, self.config.sample_ratio, self.config.selection, self.rng(SERVER, "server"))
        self.distil(targets, kept)
        self.metrics = {
            "distilled_samples": len(kept),
            "mean_bald": float(scores.mean()),
            "mean_bald_kept": float(scores[torch.as_tensor(kept, device=scores.device)].mean()),
            "mean_max_weight": float(weights.max(0).values.mean()),
            **self.diagnostics(outputs, uploads),
        }

    def teacher_outputs(self, uploads: dict[int, Message]) -> TeacherOutputs:
        """Every upload's features and logits on the server set U (one reusable teacher model)."""
        data = self.ctx.data
        clients = sorted(uploads)
        features, logits = [], []
        for client in clients:
            self.teacher.load_state_dict(model_state(uploads[client]))
            z, out = predict_features(self.teacher, data.dataset, data.transfer)
            features.append(z)
            logits.append(out)
        return TeacherOutputs(clients, torch.stack(features), torch.stack(logits))

    def teacher_weights(self, outputs: TeacherOutputs, uploads: dict[int, Message]) -> torch.Tensor:
        """(K, N) weights of the teachers per sample: uniform for FedDF."""
        teachers, samples = outputs.logits.shape[:2]
        return torch.full((teachers, samples), 1.0 / teachers, dtype=torch.float64, device=outputs.logits.device)

    def distil(self, targets: torch.Tensor, kept) -> None:
        """Train the student on the kept samples of U towards their ensemble targets (KL)."""
        data = self.ctx.data
        position = torch.as_tensor(kept, device=targets.device)
        chosen = targets[position]
        temperature = self.config.temperature

        def loss_fn(model, batch: Batch) -> torch.Tensor:
            return kd_kl(model(batch.x), chosen[batch.position], temperature, scale_by_t2=False)

        train(self.model, data.dataset, data.transfer[kept], self.config.server_train(self.ctx.train),
              generator=self.generator(SERVER, "server"), loss_fn=loss_fn, augment=False)

    def diagnostics(self, outputs: TeacherOutputs, uploads: dict[int, Message]) -> dict:
        """Per teacher and true class of U, the mean entropy of its softmax output (FedUA Figs. 8/10).
        U's labels are read for this diagnostic only; training never sees them."""
        labels = self.ctx.data.dataset.y_train[torch.as_tensor(self.ctx.data.transfer)]
        probs = torch.softmax(outputs.logits.double(), dim=-1)
        return {"teachers": outputs.clients,
                "softmax_entropy": per_class_means(entropy(probs).cpu(), labels, self.ctx.data.num_classes)}

    def round_metrics(self) -> dict:
        return self.metrics


def per_class_means(values: torch.Tensor, labels: torch.Tensor, num_classes: int) -> list[list[float | None]]:
    """(K, N) values -> K lists of the mean over the samples of each class (None: no sample)."""
    rows = []
    for row in values:
        rows.append([float(row[labels == c].mean()) if bool((labels == c).any()) else None
                     for c in range(num_classes)])
    return rows
