"""Measurements beyond the tables: the prototype identity (Eq. 5 averaged over a class is the class
mean, for any number of components, up to EM's stopping error), on real features and on a
hand-made mixture whose components overlap, and the models' sizes."""

from __future__ import annotations

import warnings

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...algorithms.fedgmkd import best_gmm_by_bic, code_prototype, eq5_prototype, gmm_prototype
from ...host_threads import on_one_host_thread
from .grid import Params, data_config

if TYPE_CHECKING:  # scikit-learn is imported where a mixture is fitted (see algorithms/fedgmkd.py)
    from sklearn.mixture import GaussianMixture

# The component counts the real-feature demonstration also fits at, whatever BIC picks.
FIXED_COMPONENTS = (2, 3)
# sklearn's default EM tolerance (the one the runs use, first) and tighter ones.
TOLERANCES = (1e-3, 1e-6, 1e-9, 1e-12)
# The hand-made mixture: three overlapping 2-d Gaussians (unit spread, centres 3 apart).
MIXTURE_CENTRES = 3.0 * np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.87]])
MIXTURE_COUNTS = (150, 100, 50)


def eq5_gap(x: np.ndarray, gmm: GaussianMixture) -> float:
    """‖Eq. 5 averaged over the samples − their mean‖."""
    return float(np.linalg.norm(eq5_prototype(x, gmm) - x.mean(0)))


def largest_responsibility(x: np.ndarray, gmm: GaussianMixture) -> float:
    """The mean over the samples of their largest responsibility: 1 when every sample lies wholly
    in one component, 1/M when every sample is shared equally among M components."""
    return float(gmm.predict_proba(x).max(1).mean())


def fit_gmm(x: np.ndarray, components: int, tol: float = 1e-3, random_state: int = 0) -> GaussianMixture:
    """A full-covariance GMM of ``components`` components, EM run until the mean log-likelihood
    gains less than ``tol`` (sklearn's rule; iterations are not capped short of that)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianMixture(components, covariance_type="full", tol=tol, max_iter=100_000,
                               random_state=random_state).fit(x)


def fit_row(x: np.ndarray, gmm: GaussianMixture) -> dict:
    """One fitted mixture on the samples ``x``: its components, EM iterations, mean largest
    responsibility, and the distances from the mean of Eq. 5 and of Σ_m π_m μ_m."""
    return {"components": gmm.n_components, "EM iterations": gmm.n_iter_,
            "mean largest γ": largest_responsibility(x, gmm), "‖Eq. 5 − mean‖": eq5_gap(x, gmm),
            "‖Σ π_m μ_m − mean‖": float(np.linalg.norm(gmm.weights_ @ gmm.means_ - x.mean(0))),
            "‖mean‖": float(np.linalg.norm(x.mean(0)))}


def hand_made_mixture(seed: int = 1) -> np.ndarray:
    """:data:`MIXTURE_COUNTS` points from each of three 2-d Gaussians of unit spread around
    :data:`MIXTURE_CENTRES`: components that overlap, so a fitted mixture shares points among them."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(centre, 1.0, (count, 2)) for centre, count in zip(MIXTURE_CENTRES, MIXTURE_COUNTS)])


@on_one_host_thread
def mixture_identity(min_components: int = 1, max_components: int = 6, tolerances=TOLERANCES,
                     seed: int = 1) -> pd.DataFrame:
    """On :func:`hand_made_mixture`: the number of components BIC picks among min..max (as the runs
    pick it), then that mixture refitted at each EM tolerance, one row each (:func:`fit_row`)."""
    x = hand_made_mixture(seed)
    components = best_gmm_by_bic(x, min_components, max_components, random_state=0).n_components
    return pd.DataFrame([{"EM tolerance": tol, **fit_row(x, fit_gmm(x, components, tol))} for tol in tolerances])


def client_features(params: Params, seed: int = 0, epochs: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The 32-d features (float64) and labels of client 0's training images (first client count,
    seed ``seed``) under ``params.model`` trained on them for ``epochs`` epochs."""
    import torch

    from ...federation import build_federated_data
    from ...models import InputShape, make_model
    from ...randomness import party_generator
    from ...training import predict_features, train

    data = build_federated_data(data_config(params, params.client_counts()[0]), seed=seed)
    shape = InputShape(data.dataset.in_channels, data.dataset.image_size, data.num_classes)
    model = make_model(params.model, shape, seed=seed).to(memory_format=torch.channels_last)
    indices = data.client_train[0]
    train(model, data.dataset, indices, params.train, generator=party_generator(seed, 0, 0), epochs=epochs)
    features, _ = predict_features(model, data.dataset, indices)
    return features.double().numpy(), data.dataset.y_train[torch.as_tensor(indices)].numpy()


def fixed_fit(x: np.ndarray, components: int) -> dict:
    """:func:`fit_row` of a mixture with ``components`` components fitted as the runs fit one
    (sklearn's defaults); NaN where it cannot be fitted (fewer samples than components)."""
    gmm = best_gmm_by_bic(x, components, components, random_state=0)
    return {"‖Eq. 5 − mean‖": np.nan, "mean largest γ": np.nan} if gmm is None else fit_row(x, gmm)


def prototype_identity(params: Params, seed: int = 0, epochs: int = 2, fixed=FIXED_COMPONENTS) -> pd.DataFrame:
    """Per class of client 0 (:func:`client_features`), in float64: the paper's Eq. 5 prototype
    against the class mean (FedHKD) with the number of components BIC picks in the chapter's range
    (as the runs compute it) and with each of ``fixed`` components; and the released code's
    prototype. Rows: class, images, "M by BIC" (0: one image, no mixture), ‖Eq. 5 − class mean‖ at
    BIC's M and at each fixed M, the mean largest responsibility at each fixed M, ‖class mean‖,
    ‖code prototype‖."""
    features, labels = client_features(params, seed, epochs)
    return class_identity_rows(features, labels, params, fixed)


@on_one_host_thread
def class_identity_rows(features: np.ndarray, labels: np.ndarray, params: Params, fixed=FIXED_COMPONENTS) -> pd.DataFrame:
    """:func:`prototype_identity`'s rows for given features and labels (the fits on one host thread)."""
    fit = {"min_components": params.min_components, "max_components": params.max_components, "random_state": 0}
    rows = []
    for j in np.unique(labels):
        x = features[labels == j]
        prototype, components = gmm_prototype(x, **fit)
        row = {"class": int(j), "images": len(x), "M by BIC": components,
               "‖Eq. 5 − class mean‖": float(np.linalg.norm(prototype - x.mean(0)))}
        for count in fixed:
            fitted = fixed_fit(x, count)
            row[f"‖Eq. 5 − class mean‖, M = {count}"] = fitted["‖Eq. 5 − mean‖"]
            row[f"mean largest γ, M = {count}"] = fitted["mean largest γ"]
        row["‖class mean‖"] = float(np.linalg.norm(x.mean(0)))
        row["‖code prototype‖"] = float(np.linalg.norm(code_prototype(x, **fit)[0]))
        rows.append(row)
    return pd.DataFrame(rows)


def parameter_count(model: str) -> int:
    """Trainable parameters of ``model`` on CIFAR-10 (32 × 32 RGB, 10 classes)."""
    from ...models import InputShape, make_model

    return sum(p.numel() for p in make_model(model, InputShape(3, 32, 10), seed=0).parameters() if p.requires_grad)
