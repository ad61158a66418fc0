"""FedUA (Lee and Wu, Information 14(4):234, 2023): FedDF with uncertainty-aware teachers.

Each client, after training, fits a Gaussian discriminant analysis of its own penultimate
features (:func:`fit_feature_density`) and uploads it with the model. The server weighs each
teacher per sample by how familiar the sample is to that teacher, the teacher's feature density
normalised across teachers (:func:`teacher_weights`), mixes the teachers' logits with those
weights, keeps the share ``sample_ratio`` of the server set on which the teachers disagree most
(:func:`bald_scores`), and distils into the FedAvg-initialised student as FedDF does.

Eqs. 1-2b did not survive the paper's text extraction: the GDA fit, the mixture density and the
softmax-over-teachers normalisation are reconstructed (see the chapter and
``../shared/specs/fedua.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..feature_density import FeatureDensity, fit_feature_density
from ..training import predict_features
from ..uncertainty import bald_scores, entropy, teacher_weights
from .shapes.base import Message
from .feddf import FedDF, FedDFConfig, TeacherOutputs, per_class_means

__all__ = ["FedUA", "FedUAConfig", "bald_scores", "fit_feature_density", "teacher_weights"]


@dataclass(frozen=True)
class FedUAConfig(FedDFConfig):
    """FedDF's settings plus the weighting. Defaults: BALD selection of 60% of U (Table 1's best
    ratio; the ratio of Tables 2-3 is not stated).

    weighting: "density" (FedUA: softmax over teachers of log p_k(x)), "density_std" (each
        teacher's log p_k(x) first standardised by the mean and std of the log-densities of its
        own training features, uploaded as two more floats: makes teachers whose feature spaces
        differ in scale comparable), or "uniform" (FedDF's weights, for ablations).
    density_temperature: tau in softmax_k(log p_k(x) / tau) (1: the densities normalised).
    covariance_shrinkage: share of the pooled within-class covariance mixed into each class's.
    """

    sample_ratio: float = 0.6
    weighting: str = "density"
    density_temperature: float = 1.0
    covariance_shrinkage: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {sorted(WEIGHTINGS)} (got {self.weighting!r})")
        if not self.density_temperature > 0:
            raise ValueError(f"density_temperature must be > 0 (got {self.density_temperature})")
        if not 0.0 <= self.covariance_shrinkage <= 1.0:
            raise ValueError(f"covariance_shrinkage must be in [0, 1] (got {self.covariance_shrinkage})")


def densities_of(outputs: TeacherOutputs, uploads: dict[int, Message]) -> list[FeatureDensity]:
    return [FeatureDensity.from_message(uploads[k]) for k in outputs.clients]


def _density_weights(config: FedUAConfig, outputs: TeacherOutputs, uploads: dict[int, Message]) -> torch.Tensor:
    log_densities = torch.stack([density.log_prob(z) for density, z in
                                 zip(densities_of(outputs, uploads), outputs.features)])
    return teacher_weights(log_densities, config.density_temperature)


def _standardised_density_weights(config: FedUAConfig, outputs: TeacherOutputs,
                                  uploads: dict[int, Message]) -> torch.Tensor:
    scores = []
    for density, z, client in zip(densities_of(outputs, uploads), outputs.features, outputs.clients):
        mean, std = uploads[client]["gda_logp_stats"].double().tolist()
        scores.append((density.log_prob(z) - mean) / max(std, 1e-12))
    return teacher_weights(torch.stack(scores), config.density_temperature)


def _uniform_weights(config: FedUAConfig, outputs: TeacherOutputs, uploads: dict[int, Message]) -> torch.Tensor:
    teachers, samples = outputs.logits.shape[:2]
    return torch.full((teachers, samples), 1.0 / teachers, dtype=torch.float64, device=outputs.logits.device)


WEIGHTINGS = {"density": _density_weights, "density_std": _standardised_density_weights,
              "uniform": _uniform_weights}


class FedUA(FedDF):
    Config = FedUAConfig

    def client_update(self, client: int, message: Message) -> Message:
        upload = super().client_update(client, message)
        data = self.ctx.data
        indices = data.client_train[client]
        features, _ = predict_features(self.worker, data.dataset, indices)
        labels = data.dataset.y_train[torch.as_tensor(indices)]
        density = fit_feature_density(features, labels, data.num_classes, self.config.covariance_shrinkage)
        upload = {**upload, **density.to_message()}
        if self.config.weighting == "density_std":
            log_p = FeatureDensity.from_message(density.to_message()).log_prob(features)
            upload["gda_logp_stats"] = torch.stack([log_p.mean(), log_p.std()]).float().cpu()
        return upload

    def teacher_weights(self, outputs: TeacherOutputs, uploads: dict[int, Message]) -> torch.Tensor:
        return WEIGHTINGS[self.config.weighting](self.config, outputs, uploads)

    def diagnostics(self, outputs: TeacherOutputs, uploads: dict[int, Message]) -> dict:
        """FedDF's plus, per teacher, the entropy of the density's class posterior by true class
        of U (Figs. 9/11) and the covariance jitter each client's GDA needed."""
        labels = self.ctx.data.dataset.y_train[torch.as_tensor(self.ctx.data.transfer)]
        densities = densities_of(outputs, uploads)
        posterior_entropy = torch.stack([entropy(d.posterior(z)) for d, z in zip(densities, outputs.features)])
        return {**super().diagnostics(outputs, uploads),
                "density_entropy": per_class_means(posterior_entropy.cpu(), labels, self.ctx.data.num_classes),
                "gda_jitter": [d.relative_jitter for d in densities]}
