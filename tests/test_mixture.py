"""fedkd_core.mixture: FedGMKD's per-class mixtures as one batched EM in torch, against
scikit-learn's fits (the committed records' backend) on hand-made clusters and on a trained model's
real features; determinism; the degenerate classes; the config field that keeps records' keys.

The tolerance (fedkd_core/mixture.py's docstring): both backends run scikit-learn's algorithm in
float64 and differ in k-means++'s random draws. Where the k-means partition is unique (separated
clusters) the fits are the same fits: same BIC-best k, parameters and BIC to 1e-9 relative. On
real features the seedings can reach different optima (and another k); the uploaded prototype
(Eq. 5 averaged over the class) is then still the class mean for both, so the prototypes agree to
PROTOTYPE_RTOL of the largest entry.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.fedgmkd import (FedGMKDConfig, best_gmm_by_bic, class_prototypes, code_prototype,
                                           gmm_prototype)
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.mixture import class_mixture_prototypes, fit_class_mixtures, standardise
from fedkd_core.results import key_of
from fedkd_core.training import TrainConfig, predict_features, train

PARAMETER_RTOL = 1e-9  # same partition: the same fit up to rounding
PROTOTYPE_RTOL = 1e-6  # trained features: both the class mean (measured ~1e-15; see test_degenerate_classes)


def separated_clusters(seed: int = 0, d: int = 4):
    """Five classes with 1, 2, 3, 2, 1 clusters ~30 standard deviations apart, 50 samples per
    cluster (enough that a split cluster's gain never beats BIC's penalty, whatever the optimum)."""
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for j, k in enumerate([1, 2, 3, 2, 1]):
        centres = torch.randn(k, d, generator=g, dtype=torch.float64) * 30
        which = torch.arange(50 * k) % k
        xs.append(centres[which] + torch.randn(50 * k, d, generator=g, dtype=torch.float64))
        ys += [j] * (50 * k)
    return torch.cat(xs), torch.tensor(ys)


def sorted_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b`` ordered by ``a``'s first column (components come in any order)."""
    return b[np.argsort(a[:, 0])]


def test_separated_clusters_give_scikit_learns_fits():
    x, y = separated_clusters()
    mixtures = fit_class_mixtures(x, y, 6, max_components=4, random_state=7)
    assert mixtures.classes == [0, 1, 2, 3, 4]  # class 5 is absent
    for f, j in enumerate(mixtures.classes):
        xj = x[y == j].numpy()
        reference = best_gmm_by_bic(xj, 1, 4, random_state=7)
        k = reference.n_components
        assert int(mixtures.components[f]) == k == [1, 2, 3, 2, 1][j]
        means = mixtures.means[f, :k].numpy()
        assert np.allclose(sorted_rows(means, means), sorted_rows(reference.means_, reference.means_),
                           rtol=PARAMETER_RTOL, atol=PARAMETER_RTOL * 30)
        assert np.allclose(sorted_rows(means, mixtures.weights[f, :k].numpy()[:, None]),
                           sorted_rows(reference.means_, reference.weights_[:, None]), rtol=PARAMETER_RTOL)
        assert np.isclose(float(mixtures.bic[f, k - 1]), reference.bic(xj), rtol=PARAMETER_RTOL)
        for fitted_k in range(1, k + 1):  # every k up to the true one has one partition
            fit = GaussianMixture(fitted_k, covariance_type="full", random_state=7).fit(xj)
            assert np.isclose(float(mixtures.bic[f, fitted_k - 1]), fit.bic(xj), rtol=PARAMETER_RTOL)


@pytest.mark.parametrize("prototype", ["gmm", "code"])
def test_separated_clusters_give_scikit_learns_prototypes(prototype):
    x, y = separated_clusters(seed=1)
    ours, components = class_mixture_prototypes(x, y, 6, prototype, max_components=4, random_state=3)
    rule = gmm_prototype if prototype == "gmm" else code_prototype
    for j in range(5):
        reference, k = rule(x[y == j].numpy(), min_components=1, max_components=4, random_state=3)
        assert int(components[j]) == k
        assert np.allclose(ours[j].numpy(), reference, rtol=0, atol=PARAMETER_RTOL * 30)
    assert torch.equal(ours[5], torch.zeros(4, dtype=torch.float64)) and components[5] == 0


def test_standardise_is_standard_scaler_per_class():
    from sklearn.preprocessing import StandardScaler

    x, y = separated_clusters(seed=2)
    x[:, 1] = 5.0  # a constant feature: divided by 1
    z = standardise(x, y, 5)
    for j in range(5):
        assert np.allclose(z[y == j].numpy(), StandardScaler().fit_transform(x[y == j].numpy()), atol=1e-12)


@pytest.fixture(scope="module")
def trained_features():
    """A cnn5_code32 trained for one epoch on 300 CIFAR-10 images of one client; its features on them."""
    data = build_federated_data(DataConfig("cifar10", num_clients=2, samples_per_client=300, local_test_size=1), seed=0)
    ctx = Context(data=data, model_name="cnn5_code32", device=torch.device("cpu"), seed=0,
                  train=TrainConfig(epochs=1, batch_size=32, lr=1e-3, optimizer="adam", mixed_precision=False))
    model = ctx.new_model()
    train(model, data.dataset, data.client_train[0], ctx.train, generator=torch.Generator().manual_seed(0))
    features, logits = predict_features(model, data.dataset, data.client_train[0])
    return features, data.dataset.y_train[torch.as_tensor(data.client_train[0])], logits


@pytest.mark.parametrize("prototype", ["gmm", "code"])
def test_real_features_give_scikit_learns_prototypes(trained_features, prototype):
    """On a trained model's features the two backends may choose another k for a class (other
    optima), and still upload the same prototypes: the class mean (code: zero) to PROTOTYPE_RTOL."""
    features, labels, logits = trained_features
    torch_knowledge = class_prototypes(features, labels, 10, logits, prototype=prototype, random_state=11,
                                       mixture_backend="torch")
    sklearn_knowledge = class_prototypes(features, labels, 10, logits, prototype=prototype, random_state=11)
    assert torch.equal(torch_knowledge.counts, sklearn_knowledge.counts)
    assert torch.equal(torch_knowledge.soft_predictions, sklearn_knowledge.soft_predictions)
    assert torch.equal(torch_knowledge.components > 0, sklearn_knowledge.components > 0)
    # in float64, before the upload's float32
    x, y = features.double(), labels
    ours, _ = class_mixture_prototypes(x, y, 10, prototype, random_state=11)
    rule = gmm_prototype if prototype == "gmm" else code_prototype
    scale = float(x.abs().max())
    for j in torch.unique(y).tolist():
        reference, _ = rule(x[y == j].numpy(), min_components=1, max_components=6, random_state=11)
        assert np.abs(ours[j].numpy() - reference).max() <= PROTOTYPE_RTOL * scale
    if prototype == "gmm":  # and both are the class means (fact 5)
        means = torch.stack([x[y == j].mean(0) if (y == j).any() else torch.zeros(x.shape[1]).double()
                             for j in range(10)])
        assert (ours - means).abs().max() <= PROTOTYPE_RTOL * scale


def test_same_seed_same_fits_and_draws_independent_of_other_classes(trained_features):
    features, labels, _ = trained_features
    first = fit_class_mixtures(features, labels, 10, random_state=5)
    again = fit_class_mixtures(features, labels, 10, random_state=5)
    for a, b in zip(first, again):
        assert (a == b) if isinstance(a, list) else torch.equal(a, b)
    # a class's fit depends on its own samples and the seed, not on the other classes present
    keep = (labels == first.classes[0]) | (labels == first.classes[1])
    alone = fit_class_mixtures(features[keep], labels[keep], 10, random_state=5)
    assert torch.equal(alone.bic, first.bic[:2]) and torch.equal(alone.means, first.means[:2])
    # the tile size is a layout, not a result
    tiled = fit_class_mixtures(features, labels, 10, random_state=5, tile=16, check_every=4)
    assert torch.equal(tiled.components, first.components)
    assert torch.allclose(tiled.means, first.means, rtol=1e-10, atol=1e-10)


def test_degenerate_classes():
    """One sample: itself (0 under "code"); absent: 0; fewer samples than min_components: the mean;
    identical samples: one component (reg_covar keeps the covariance positive)."""
    x = torch.cat([torch.randn(30, 3, dtype=torch.float64), torch.full((1, 3), 2.0, dtype=torch.float64),
                   torch.ones(5, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)])
    y = torch.tensor([0] * 30 + [1] + [3] * 5 + [4] * 2)
    prototypes, components = class_mixture_prototypes(x, y, 5, "gmm", random_state=0)
    assert torch.equal(prototypes[1], x[30]) and components[1] == 0
    assert torch.equal(prototypes[2], torch.zeros(3, dtype=torch.float64)) and components[2] == 0
    assert torch.allclose(prototypes[3], torch.ones(3, dtype=torch.float64)) and components[3] == 1
    # the class mean up to the EM tolerance: with up to 6 components on 30 samples in 3-d, EM stops
    # (|Δ mean log-likelihood| < 1e-3) ~1e-3 from the fixed point, scikit-learn's fits alike
    assert torch.allclose(prototypes[0], x[:30].mean(0), atol=1e-2)
    reference = [gmm_prototype(x[y == j].numpy(), min_components=1, max_components=6, random_state=0)[1]
                 for j in (0, 3, 4)]
    assert [int(components[j]) for j in (0, 3, 4)][1:] == reference[1:]
    code, _ = class_mixture_prototypes(x, y, 5, "code", random_state=0)
    assert torch.equal(code[1], torch.zeros(3, dtype=torch.float64))
    few, few_components = class_mixture_prototypes(x, y, 5, "gmm", min_components=3, random_state=0)
    assert torch.allclose(few[4], x[-2:].mean(0)) and few_components[4] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fits_are_the_cpu_fits(trained_features):
    """The draws come from a CPU generator, so a GPU run starts from the same centres."""
    features, labels, _ = trained_features
    cpu = fit_class_mixtures(features, labels, 10, random_state=5)
    gpu = fit_class_mixtures(features.cuda(), labels.cuda(), 10, random_state=5, check_every=4)
    assert torch.equal(gpu.components, cpu.components)
    assert torch.allclose(gpu.means.cpu(), cpu.means, rtol=1e-6, atol=1e-6 * float(features.abs().max()))
    prototypes, _ = class_mixture_prototypes(features.cuda(), labels.cuda(), 10, "gmm", random_state=5)
    expected, _ = class_mixture_prototypes(features, labels, 10, "gmm", random_state=5)
    assert torch.allclose(prototypes.cpu(), expected, rtol=0, atol=PROTOTYPE_RTOL * float(features.abs().max()))


def test_mixture_backend_is_a_field_that_keeps_old_keys():
    """Records without the field are "sklearn" records (results.ADDED_FIELDS): their keys stand;
    a "torch" run is keyed apart."""
    assert FedGMKDConfig().mixture_backend == "sklearn"
    with pytest.raises(ValueError, match="mixture_backend"):
        FedGMKDConfig(mixture_backend="cuda")
    from dataclasses import asdict

    config = {"algorithm": "fedgmkd", "algorithm_params": {}, "data": {}, "seed": 0}
    old = json.loads(json.dumps(config))
    old["algorithm_params"] = {k: v for k, v in asdict(FedGMKDConfig()).items() if k != "mixture_backend"}
    new = json.loads(json.dumps(config))
    new["algorithm_params"] = asdict(FedGMKDConfig())
    torch_run = json.loads(json.dumps(new))
    torch_run["algorithm_params"]["mixture_backend"] = "torch"
    assert key_of(old) == key_of(new) != key_of(torch_run)


def test_a_round_with_torch_mixtures_uploads_the_class_means():
    data = build_federated_data(DataConfig("cifar10", num_clients=2, samples_per_client=60, local_test_size=5), seed=0)
    ctx = Context(data=data, model_name="cnn5_code32", device=torch.device("cpu"), seed=0,
                  train=TrainConfig(batch_size=20, lr=1e-3, optimizer="adam", mixed_precision=False))
    method = algorithm_class("fedgmkd")(algorithm_config("fedgmkd", {"mixture_backend": "torch"}), ctx)
    method.begin_round(1)
    upload = method.client_update(0, method.download(0))
    features, _ = predict_features(method.worker, data.dataset, data.client_train[0])
    labels = data.dataset.y_train[torch.as_tensor(data.client_train[0])]
    means = class_prototypes(features, labels, 10, prototype="mean").prototypes
    held = upload["ckf/counts"] > 0
    assert torch.allclose(upload["ckf/prototypes"], means[held], atol=1e-6 * float(means.abs().max()))


@pytest.mark.parametrize("prototype", ["gmm", "code"])
def test_fits_run_as_a_gpu_would_see_them(prototype):
    """On fedkd_core.devicecheck's stand-in device nothing mixes host and device tensors (CUDA would
    refuse it), and the prototypes are the CPU's."""
    from fedkd_core.devicecheck import STAND_IN, DeviceCheck

    x, y = separated_clusters(seed=3)
    expected, expected_components = class_mixture_prototypes(x, y, 6, prototype, max_components=4, random_state=1)
    with DeviceCheck():
        prototypes, components = class_mixture_prototypes(x.to(STAND_IN), y.to(STAND_IN), 6, prototype,
                                                          max_components=4, random_state=1)
        prototypes = prototypes.cpu()
    assert torch.equal(components, expected_components)
    assert torch.allclose(prototypes, expected, rtol=0, atol=1e-12)
