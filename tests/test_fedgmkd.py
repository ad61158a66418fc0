"""FedGMKD: CKF (Eqs. 4-5) and the facts about its prototypes, DAT (Eqs. 9-12) and the code's
weights on hand-made numbers, the loss terms of Eq. (13), the round structure and its bytes,
client-state separability and a short real run on CIFAR-10 (shared/specs/fedgmkd.md §6)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture
from torch import nn
from torch.nn import functional as F

import fedkd_core.algorithms.fedgmkd as module
from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.shapes.base import message_bytes, parameters_message
from fedkd_core.algorithms.fedgmkd import (
    FedGMKDConfig, GlobalKnowledge, aggregate_knowledge, class_prototypes, code_model_weights,
    discrepancy_aware_weights, eq5_prototype, fedgmkd_loss, kl_rows, relu_adjusted_weights)
from fedkd_core.experiment import ExperimentConfig, _run_round, simulate
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.models import SplitModel
from fedkd_core.training import TrainConfig, predict_features, train
from separability import assert_clients_separable

# --- CKF -----------------------------------------------------------------------------------------


def one_d_mixture(weights, means, variances) -> GaussianMixture:
    """A fitted-looking sklearn GMM with the given 1-D parameters."""
    gmm = GaussianMixture(len(weights), covariance_type="full")
    gmm.weights_ = np.asarray(weights, dtype=float)
    gmm.means_ = np.asarray(means, dtype=float).reshape(-1, 1)
    gmm.covariances_ = np.asarray(variances, dtype=float).reshape(-1, 1, 1)
    gmm.precisions_cholesky_ = 1.0 / np.sqrt(gmm.covariances_)
    return gmm


def test_responsibilities_are_eq4():
    """γ_m(x) = π_m N(x; μ_m, Σ_m) / Σ_s π_s N(x; μ_s, Σ_s): π = (½, ½), μ = (−1, 1), Σ = (1, 1)."""
    gamma = one_d_mixture([0.5, 0.5], [-1.0, 1.0], [1.0, 1.0]).predict_proba(np.array([[0.0], [1.0]]))
    by_hand = [math.exp(-2) / (1 + math.exp(-2)), 1 / (1 + math.exp(-2))]
    assert gamma[0] == pytest.approx([0.5, 0.5]) and gamma[1] == pytest.approx(by_hand, abs=1e-12)
    assert gamma[1] == pytest.approx([0.119203, 0.880797], abs=1e-6)
    assert gamma.sum(1) == pytest.approx([1.0, 1.0])


def m_step(x: np.ndarray, resp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EM's M-step for the weights and means: π_m = N_m / N, μ_m = Σ_n r_nm x_n / N_m."""
    nk = resp.sum(0)
    return nk / len(x), (resp.T @ x) / nk[:, None]


def test_prototype_identity_by_hand():
    """Facts 4-5: after an M-step Σ_m π_m μ_m is the mean, and so is (1/N) Σ_n Σ_m r_nm μ_m."""
    x, resp = np.array([[0.0], [2.0], [10.0]]), np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    pi, mu = m_step(x, resp)
    assert pi == pytest.approx([2 / 3, 1 / 3]) and mu.ravel() == pytest.approx([1.0, 10.0])
    assert (pi @ mu).item() == pytest.approx(4.0) == x.mean()
    assert float((resp @ mu).mean()) == pytest.approx(4.0)


@pytest.mark.parametrize("components", [1, 2, 3])
def test_fitted_gmm_prototype_is_the_class_mean(components):
    """Property (facts 4-5) on a fitted sklearn GMM: Σ π μ equals mean(X) to rounding, and Eq. (5)
    averaged over the samples (responsibilities recomputed by an E-step) equals it to EM tolerance."""
    rng = np.random.default_rng(components)
    x = np.concatenate([rng.normal(0, 1, (30, 8)), rng.normal(4, 0.5, (30, 8))])
    gmm = GaussianMixture(components, covariance_type="full", random_state=0).fit(x)
    scale = np.linalg.norm(x)
    assert np.linalg.norm(gmm.weights_ @ gmm.means_ - x.mean(0)) < 1e-8 * scale
    assert np.linalg.norm(eq5_prototype(x, gmm) - x.mean(0)) < 1e-6 * scale


def class_features(rng, counts=(40, 25, 1), dim=6):
    features = torch.cat([torch.as_tensor(rng.normal(3 * j, 1 + j, (n, dim))) for j, n in enumerate(counts)]).float()
    labels = torch.cat([torch.full((n,), j) for j, n in enumerate(counts)])
    return features, labels


def test_class_prototypes_gmm_equals_mean_and_absent_classes_are_zero():
    features, labels = class_features(np.random.default_rng(0))
    gmm = class_prototypes(features, labels, 4, prototype="gmm", max_components=3, random_state=0)
    mean = class_prototypes(features, labels, 4, prototype="mean")
    assert gmm.counts.tolist() == [40, 25, 1, 0]
    assert torch.allclose(gmm.prototypes, mean.prototypes, atol=1e-5)
    assert torch.allclose(mean.prototypes[2], features[-1])  # one sample: the sample itself
    assert torch.equal(gmm.prototypes[3], torch.zeros(6))  # absent class
    assert 1 <= gmm.components[0] <= 3 and gmm.components[3] == 0


def test_code_prototype_is_numerically_zero():
    """Fact 4: the released code's per-class-standardised GMM prototype is the zero vector."""
    features, labels = class_features(np.random.default_rng(1), counts=(50, 12, 1), dim=32)
    code = class_prototypes(features * 7 + 3, labels, 3, prototype="code", max_components=3, random_state=42)
    assert code.prototypes[:2].norm(dim=1).max() < 1e-6
    assert torch.equal(code.prototypes[2], torch.zeros(32))  # n = 1: exactly 0


def test_soft_prediction_is_the_class_mean_of_tempered_softmax():
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    knowledge = class_prototypes(torch.zeros(2, 3), torch.tensor([0, 0]), 2, logits, temperature=0.5,
                                 prototype="mean")
    assert knowledge.soft_predictions[0].tolist() == pytest.approx([0.741007, 0.258993], abs=1e-6)
    assert knowledge.soft_predictions[1].tolist() == [0.0, 0.0]


# --- DAT -----------------------------------------------------------------------------------------

COUNTS = torch.tensor([30.0, 10.0])
SOFT = torch.tensor([[0.9, 0.1], [0.5, 0.5]])
PROTOS = torch.tensor([[1.0, 0.0], [0.0, 1.0]])


def test_dat_paper_numbers():
    """Eqs. 9-12 with a = b = 0.2: w_init (0.75, 0.25), Q̂ (0.8, 0.2), d (0.036690, 0.223144)."""
    reference = torch.tensor([0.8, 0.2])
    d = kl_rows(SOFT, reference.expand(2, -1))
    assert d.tolist() == pytest.approx([0.036690, 0.223144], abs=1e-6)
    assert (torch.tensor([0.75, 0.25]) - 0.2 * d + 0.2).tolist() == pytest.approx([0.942662, 0.405371], abs=1e-6)
    weights = discrepancy_aware_weights(COUNTS, SOFT, reference)
    assert weights.tolist() == pytest.approx([0.699287, 0.300713], abs=1e-6)
    # the whole server step, one class j = 0 held by both clients (preliminary reference by default)
    G, w = aggregate_knowledge(torch.stack([COUNTS, torch.zeros(2)], 1).long(), torch.stack([PROTOS, PROTOS], 1),
                               torch.stack([SOFT, SOFT], 1), None, FedGMKDConfig())
    assert w[0].tolist() == pytest.approx([0.699287, 0.300713], abs=1e-6)
    assert G.H[0].tolist() == pytest.approx([0.699287, 0.300713], abs=1e-6)
    assert G.Q[0].tolist() == pytest.approx([0.779715, 0.220285], abs=1e-6)
    assert G.has.tolist() == [True, False] and G.H[1].tolist() == [0.0, 0.0]  # class held by nobody: absent


def test_dat_clipping_fallback_and_clients_without_the_class():
    reference = torch.tensor([0.8, 0.2])
    assert discrepancy_aware_weights(COUNTS, SOFT, reference, a=10).tolist() == pytest.approx([1.0, 0.0])
    # every ReLU 0 (a large, b = 0): back to w_init
    assert discrepancy_aware_weights(COUNTS, SOFT, reference, a=100, b=0).tolist() == pytest.approx([0.75, 0.25])
    # a client without the class gets nothing, although b = 0.2 would give it weight
    weights = discrepancy_aware_weights(torch.tensor([30.0, 0.0, 10.0]), torch.cat([SOFT[:1], torch.zeros(1, 2),
                                                                                    SOFT[1:]]), reference)
    assert weights.tolist() == pytest.approx([0.699287, 0.0, 0.300713], abs=1e-6)


def test_previous_reference_uses_last_rounds_q():
    counts = torch.tensor([[30], [10]])
    previous = GlobalKnowledge(torch.zeros(1, 2), torch.tensor([[0.5, 0.5]]), torch.tensor([True]))
    config = FedGMKDConfig(dat_reference="previous")
    _, w = aggregate_knowledge(counts, PROTOS[:, None], SOFT[:, None], previous, config)
    d = kl_rows(SOFT, torch.tensor([0.5, 0.5]).expand(2, -1))
    expected = torch.relu(torch.tensor([0.75, 0.25]) - 0.2 * d + 0.2)
    assert w[0].tolist() == pytest.approx((expected / expected.sum()).tolist(), abs=1e-6)
    _, first = aggregate_knowledge(counts, PROTOS[:, None], SOFT[:, None], None, config)  # none yet: preliminary
    assert first[0].tolist() == pytest.approx([0.699287, 0.300713], abs=1e-6)


def test_code_model_weights():
    """ReLU(n − 0.2·‖p − 1/C‖ + 0.2): n = (30, 10), p = ((1, 0), (½, ½)) → d = (0.707107, 0)."""
    weights = code_model_weights(torch.tensor([[30, 0], [5, 5]]))
    assert (weights / weights.sum()).tolist() == pytest.approx([0.746638, 0.253362], abs=1e-6)


def test_code_knowledge_weights_round_two_and_sub_normalisation():
    """The code's DAT: ĥ = H_prev = 0 → d = 0 → weights (n_i + 0.2) / Σ(n + 0.2) over *all* selected
    clients; a class not held by everyone is sub-normalised; a = 0.4 on the feature KL / dim."""
    config = FedGMKDConfig(variant="code")
    counts = torch.tensor([[30, 0], [6, 4]])  # client 0 lacks class 1; n = (30, 10)
    zero = torch.zeros(2, 2, 32)
    soft = torch.full((2, 2, 2), 0.5)
    previous = GlobalKnowledge(torch.zeros(2, 32), torch.full((2, 2), 0.5), torch.tensor([True, True]))
    _, w = aggregate_knowledge(counts, zero, soft, previous, config)
    assert w[0].tolist() == pytest.approx([30.2 / 40.4, 10.2 / 40.4])
    assert w[1].tolist() == pytest.approx([0.0, 10.2 / 40.4])  # Σ w < 1: the code's denominator
    # a nonzero prototype: d = KL(softmax(H_prev) ‖ softmax(ĥ)) / 32
    protos = zero.clone()
    protos[1, 0, 0] = 3.0
    _, w = aggregate_knowledge(counts, protos, soft, previous, config)
    uniform, shifted = torch.full((32,), 1 / 32), F.softmax(protos[1, 0], 0)
    d = float((uniform * (uniform / shifted).log()).sum()) / 32
    assert w[0, 1].item() == pytest.approx((10.2 - 0.4 * d) / (40.4 - 0.4 * d))


def test_code_round_one_quirk_is_log_32_and_not_reproduced():
    """In the code's second round H_prev[c][0] indexes a scalar; softmax of a scalar is 1, so the
    discrepancy of a zero prototype is −mean(log_softmax(0)) = log 32 (documented only)."""
    quirk = F.kl_div(F.log_softmax(torch.zeros(32), dim=0), F.softmax(torch.tensor(0.0), dim=0), reduction="sum") / 32
    assert float(quirk) == pytest.approx(math.log(32)) == pytest.approx(3.465736, abs=1e-6)
    # here: the first reference is the plain mean over the selected clients of this round's prototypes
    _, w = aggregate_knowledge(torch.tensor([[30], [10]]), torch.zeros(2, 1, 32), torch.full((2, 1, 1), 1.0), None,
                               FedGMKDConfig(variant="code"))
    assert w[0].tolist() == pytest.approx([30.2 / 40.4, 10.2 / 40.4])


def test_relu_weights_over_all_clients_fall_back_when_all_clipped():
    w = relu_adjusted_weights(torch.tensor([30.0, 10.0]), torch.tensor([100.0, 100.0]), torch.tensor([True, True]),
                              a=1.0, b=0.2, over_all_clients=True)
    assert w.tolist() == pytest.approx([0.75, 0.25])


# --- Eq. (13) ------------------------------------------------------------------------------------

X = torch.tensor([[1.0, 0.0]])
Y = torch.tensor([0])
KNOWLEDGE = GlobalKnowledge(torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
                            torch.tensor([True, True]))


def loss_terms(loss_form, lam=0.0, gamma=0.0, knowledge=KNOWLEDGE):
    return float(fedgmkd_loss(X, X, Y, nn.Identity(), knowledge, lam=lam, gamma=gamma, temperature=1.0,
                              loss_form=loss_form))


def test_loss_terms_by_hand():
    """Identity features and head, T = 1, x = (1, 0), y = 0, H = ((0,0),(1,1)), Q = ((1,0),(0,1))."""
    ce = math.log(1 + math.exp(-1))
    assert loss_terms("paper") == pytest.approx(ce) == pytest.approx(0.313262, abs=1e-6)
    assert loss_terms("paper", lam=1) - ce == pytest.approx(1.0)  # ‖x − H_0‖²
    assert loss_terms("code", lam=1) - ce == pytest.approx(0.5)  # MSE mean over d = 2
    # ½[‖σ(0,0) − (1,0)‖² + ‖σ(1,1) − (0,1)‖²]
    assert loss_terms("paper", gamma=1) - ce == pytest.approx(0.5)
    assert loss_terms("code", gamma=1) - ce == pytest.approx(math.log(2) / 2)  # Σ KL / (J·C)
    literal = float(fedgmkd_loss(X, X, Y, nn.Identity(), KNOWLEDGE, lam=0, gamma=1, temperature=1.0, kd_on="logits"))
    assert literal - ce == pytest.approx(0.5 * ((0 - 1) ** 2 + 0 + 1 + 0))  # ‖C(H)/T − Q/T‖², logits vs probs


def test_loss_ignores_classes_absent_from_g():
    """A class held by nobody is not in the KD sum, and a sample of it is not pulled anywhere."""
    garbage = GlobalKnowledge(torch.tensor([[0.0, 0.0], [50.0, -9.0]]), torch.tensor([[1.0, 0.0], [0.3, 0.3]]),
                              torch.tensor([True, False]))
    only_class_0 = loss_terms("paper", lam=1, gamma=1, knowledge=garbage)
    ce = math.log(1 + math.exp(-1))
    assert only_class_0 - ce == pytest.approx(1.0 + 0.5)  # ‖x − H_0‖² + ‖σ(0,0) − (1,0)‖² (J = 1)
    absent_label = fedgmkd_loss(X, X, torch.tensor([1]), nn.Identity(), garbage, lam=1, gamma=0, temperature=1.0)
    assert float(absent_label) == pytest.approx(float(F.cross_entropy(X, torch.tensor([1]))))


# --- the algorithm -------------------------------------------------------------------------------

def tiny_data(samples=60):
    return build_federated_data(DataConfig("cifar10", num_clients=3, samples_per_client=samples,
                                           local_test_size=20), seed=0)


def make(data, **params):
    train_config = TrainConfig(batch_size=20, lr=1e-3, optimizer="adam", mixed_precision=False)
    ctx = Context(data=data, model_name="cnn5_code32", train=train_config, device=torch.device("cpu"), seed=0)
    params = {"max_components": 2, **params}
    return algorithm_class("fedgmkd")(algorithm_config("fedgmkd", params), ctx)


@pytest.fixture(scope="module")
def data():
    return tiny_data()


@pytest.mark.parametrize("variant", ["paper", "code"])
def test_round_one_is_ce_without_g_then_knowledge_from_round_two(data, variant, monkeypatch):
    algorithm, seen, clips = make(data, variant=variant), [], []

    def spy(*args, **kwargs):
        seen.append(kwargs["knowledge"] if "knowledge" in kwargs else args[4])
        return F.cross_entropy(args[1].float(), args[2])

    real_train = module.train
    monkeypatch.setattr(module, "fedgmkd_loss", spy)
    monkeypatch.setattr(module, "train", lambda *a, **k: clips.append(k["max_grad_norm"]) or real_train(*a, **k))
    downloads = []
    for round_index in (1, 2):
        algorithm.begin_round(round_index)
        downloads.append(algorithm.download(0))
        _run_round(algorithm, round_index, [0, 1, 2])
    assert set(downloads[0]) == set(parameters_message(algorithm.model))  # round 1: the model only
    assert not any(k.startswith("ckf/") for k in downloads[0])
    assert {"ckf/H", "ckf/Q", "ckf/has"} <= set(downloads[1])
    assert message_bytes(downloads[1]) - message_bytes(downloads[0]) == 10 * 32 * 4 + 10 * 10 * 4 + 10  # 1,690 B
    # round 1 trained without the KD loss (the spy only sees round 2), round 2 with G
    first_round_calls = len(seen)
    assert seen and all(isinstance(k, GlobalKnowledge) for k in seen)
    assert clips == [None] * 3 + ([None] * 3 if variant == "paper" else [1.1] * 3)
    assert first_round_calls == 3 * math.ceil(60 / 20)  # round 2 only: 3 clients × 3 batches, 1 epoch


def test_upload_bytes_are_model_plus_ckf(data):
    """CKF upload = J_k·(d + C)·4 + C·8 (1,760 B for d = 32, C = 10, J_k = 10)."""
    algorithm = make(data)
    algorithm.begin_round(1)
    upload = algorithm.client_update(0, algorithm.download(0))
    held = int((data.dataset.y_train[torch.as_tensor(data.client_train[0])].bincount(minlength=10) > 0).sum())
    model_bytes = message_bytes(parameters_message(algorithm.model))
    assert message_bytes(upload) - model_bytes == held * (32 + 10) * 4 + 10 * 8
    assert upload["ckf/counts"].sum() == len(data.client_train[0])
    # fact 5 on a trained model's real features: the uploaded Eq. (5) prototypes are the class means
    features, _ = predict_features(algorithm.worker, data.dataset, data.client_train[0])
    labels = data.dataset.y_train[torch.as_tensor(data.client_train[0])]
    means = class_prototypes(features, labels, 10, prototype="mean").prototypes
    held_rows = upload["ckf/counts"] > 0
    assert torch.allclose(upload["ckf/prototypes"], means[held_rows], atol=1e-4 * float(means.abs().max()))


def test_model_weights_size_and_code(data, monkeypatch):
    """The server averages models with size weights (paper) or the code's ReLU weights."""
    captured = []
    real = module.weighted_average
    monkeypatch.setattr(module, "weighted_average", lambda states, weights: captured.append(weights) or
                        real(states, weights))
    for variant in ("paper", "code"):
        algorithm = make(data, variant=variant)
        _run_round(algorithm, 1, [0, 1, 2])
    counts = torch.stack([data.dataset.y_train[torch.as_tensor(data.client_train[k])].bincount(minlength=10)
                          for k in range(3)])
    assert captured[0] == pytest.approx(counts.sum(1).double().tolist())
    assert captured[1] == pytest.approx(code_model_weights(counts).tolist())


@pytest.mark.parametrize("variant", ["paper", "code"])
def test_clients_on_a_replica_give_the_same_run(variant):
    """Client state (the trained personal copy) is separable: every client step on one replica,
    state moved through messages, gives the single algorithm's uploads, states and accuracies."""
    data = tiny_data(40)
    single, server = assert_clients_separable(lambda: make(data, variant=variant), data)
    assert torch.equal(single.knowledge.H, server.knowledge.H) and torch.equal(single.knowledge.Q, server.knowledge.Q)


def test_train_clips_the_gradient_norm():
    """train(max_grad_norm=c): with SGD at lr 1 the step is the clipped gradient, norm <= c."""
    data = tiny_data(20)
    model = SplitModel(nn.Flatten(), nn.Linear(32 * 32 * 3, 10))
    start = [p.detach().clone() for p in model.parameters()]
    config = TrainConfig(batch_size=20, lr=1.0, mixed_precision=False)
    train(model, data.dataset, data.client_train[0], config, generator=torch.Generator().manual_seed(0),
          loss_fn=lambda m, b: 1e3 * F.cross_entropy(m(b.x.contiguous()), b.y), max_grad_norm=0.5)
    step = torch.cat([(p.detach() - s).flatten() for p, s in zip(model.parameters(), start)])
    assert float(step.norm()) == pytest.approx(0.5, rel=1e-4)


@pytest.mark.parametrize("variant", ["paper", "code"])
def test_learns_on_real_cifar10(variant):
    """Two rounds, three clients, 900 CIFAR-10 images, cnn5_code32: above always answering a
    client's (the pool's) largest class, 0.24 local and 0.10 global here."""
    from fedkd_core.conformance import majority_scores
    from fedkd_core.federation import build_federated_data

    start = time.perf_counter()
    config = ExperimentConfig(
        algorithm="fedgmkd", algorithm_params={"variant": variant, "max_components": 3},
        data=DataConfig(dataset="cifar10", num_clients=3, alpha=0.5, pool_size=900, local_test_size=100),
        model="cnn5_code32", train=TrainConfig(epochs=3, batch_size=32, lr=1e-3, optimizer="adam",
                                               mixed_precision=False),
        rounds=2, global_test_size=500, seed=0)
    history = simulate(config, progress=False)["history"]
    # measured (seed 0, fp32): local 0.32 / 0.37, global 0.15 / 0.19 (paper / code); FedAvg's global 0.20
    majority = majority_scores(build_federated_data(config.data, config.seed))
    assert history[-1]["alma"] > majority["alma"] + 0.05, (history[-1], majority)
    assert history[-1]["global_acc"] > majority["global_acc"] + 0.03, (history[-1], majority)
    assert history[1]["bytes_down"] == history[0]["bytes_down"] + 3 * 1690
    assert 0 <= history[-1]["dat_shift"] <= 1
    print(f"{variant}: {time.perf_counter() - start:.1f} s, alma {history[-1]['alma']:.3f}, "
          f"global {history[-1]['global_acc']:.3f}")


@pytest.mark.parametrize("params,name", [
    ({"variant": "both"}, "variant"), ({"prototype": "kmeans"}, "prototype"),
    ({"dat_reference": "next"}, "dat_reference"), ({"dat_init": "uniform"}, "dat_init"),
    ({"model_weights": "uniform"}, "model_weights"), ({"loss_form": "kl"}, "loss_form"),
    ({"kd_on": "features"}, "kd_on"), ({"lam": -0.1}, "lam"), ({"gamma": -1}, "gamma"),
    ({"temperature": 0}, "temperature"), ({"dat_a": -0.2}, "dat_a"), ({"dat_b": -0.2}, "dat_b"),
    ({"max_grad_norm": -1.0}, "max_grad_norm"), ({"min_components": 0}, "min_components"),
    ({"min_components": 3, "max_components": 2}, "max_components"), ({"untrained_client": "none"}, "untrained_client"),
])
def test_bad_config_raises_naming_the_parameter(params, name):
    with pytest.raises(ValueError, match=name):
        algorithm_config("fedgmkd", params)
    with pytest.raises(ValueError, match="algorithm_params"):
        algorithm_config("fedgmkd", {"lambda": 0.1})


def test_presets_fill_only_unset_fields():
    code = FedGMKDConfig(variant="code")
    assert (code.prototype, code.dat_a, code.dat_reference, code.dat_init, code.model_weights, code.loss_form,
            code.max_grad_norm) == ("code", 0.4, "code", "client_count", "code", "code", 1.1)
    paper = FedGMKDConfig()
    assert (paper.prototype, paper.dat_a, paper.dat_reference, paper.dat_init, paper.model_weights, paper.loss_form,
            paper.max_grad_norm) == ("gmm", 0.2, "preliminary", "class_share", "size", "paper", 0.0)
    table6 = FedGMKDConfig(variant="code", prototype="mean")
    assert table6.prototype == "mean" and table6.loss_form == "code"
    from dataclasses import asdict
    assert FedGMKDConfig(**asdict(table6)) == table6  # the resolved config round-trips


def test_mixture_fits_run_on_one_host_thread_whatever_the_caller_allows(monkeypatch):
    """Thread teams cost several times the arithmetic of a class's small fit (fedkd_core.host_threads):
    every pool (each BLAS and OpenMP library loaded, by its file) is at one thread during every fit
    even where the caller allows two, the caller's limit comes back after, and the prototypes are
    those the same fits give on two threads."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def pools() -> dict:
        return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}

    seen = []
    fit = GaussianMixture.fit

    def recording_fit(self, x, y=None):
        seen.append(pools())
        return fit(self, x, y)

    g = torch.Generator().manual_seed(0)
    features, labels = torch.randn(120, 4, generator=g), torch.arange(120) % 3
    with threadpool_limits(limits=2):
        two_threads = module.host_class_prototypes.__wrapped__(features, labels, 3, max_components=2)  # without the limit
    monkeypatch.setattr(GaussianMixture, "fit", recording_fit)
    with threadpool_limits(limits=2):
        limited = class_prototypes(features, labels, 3, max_components=2)
        after = pools()
    assert len(seen) == 6 and all(set(threads.values()) == {1} for threads in seen)
    assert set(after.values()) == {2}
    assert torch.equal(two_threads.prototypes, limited.prototypes)
    assert torch.equal(two_threads.components, limited.components)


def test_the_train_configs_clipping_applies_and_an_explicit_one_wins():
    """TrainConfig(max_grad_norm=c) clips train's steps as the argument does; an explicit
    ``max_grad_norm`` argument overrides the config's; no clipping leaves the full step."""
    data = tiny_data(20)

    def step_norm(config, **kwargs):
        model = SplitModel(nn.Flatten(), nn.Linear(32 * 32 * 3, 10))
        start = [p.detach().clone() for p in model.parameters()]
        train(model, data.dataset, data.client_train[0], config, generator=torch.Generator().manual_seed(0),
              loss_fn=lambda m, b: 1e3 * F.cross_entropy(m(b.x.contiguous()), b.y), **kwargs)
        return float(torch.cat([(p.detach() - s).flatten() for p, s in zip(model.parameters(), start)]).norm())

    plain = TrainConfig(batch_size=20, lr=1.0, mixed_precision=False)
    clipped = TrainConfig(batch_size=20, lr=1.0, mixed_precision=False, max_grad_norm=0.5)
    assert step_norm(plain) > 10
    assert step_norm(clipped) == pytest.approx(0.5, rel=1e-4)
    assert step_norm(clipped, max_grad_norm=2.0) == pytest.approx(2.0, rel=1e-4)
    with pytest.raises(ValueError, match="max_grad_norm"):
        TrainConfig(max_grad_norm=0.0)


def test_clipping_is_part_of_a_records_key_only_when_set():
    """A config without clipping keeps the key it had before the field existed; a clipped one differs."""
    from fedkd_core.results import outcome_fields

    resolved = {"train": {"epochs": 1, "max_grad_norm": None}, "algorithm": "fedavg"}
    assert "max_grad_norm" not in outcome_fields(resolved)["train"]
    assert outcome_fields({**resolved, "train": {"epochs": 1, "max_grad_norm": 10.0}})["train"]["max_grad_norm"] == 10.0
