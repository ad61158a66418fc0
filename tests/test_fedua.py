"""FedUA and FedDF: every step against the paper's formulas on hand-made inputs, equivalences,
the step split at FedBE's proportions, a short real CIFAR-10 run, and the chapter's grid."""

import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from scipy.stats import multivariate_normal

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.shapes.base import message_bytes
from fedkd_core.algorithms.fedua import bald_scores, fit_feature_density, teacher_weights
from fedkd_core.chapters import fedua as chapter
from fedkd_core.chapters import reuse_message
from fedkd_core.distill import kd_kl
from fedkd_core.experiment import ExperimentConfig, simulate
from fedkd_core.feature_density import FeatureDensity
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.partition import class_histograms, step
from fedkd_core.training import TrainConfig
from fedkd_core.uncertainty import ensemble_targets, select_samples

# --- the GDA of a client's features (Eqs. 1-2a) -----------------------------------------------

TWO_CLASSES = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [5.0, 5.0], [6.0, 5.0], [5.0, 7.0]])
TWO_LABELS = torch.tensor([0, 0, 0, 2, 2, 2])


def test_gda_fit_has_class_means_unbiased_covariances_and_count_priors():
    density = fit_feature_density(TWO_CLASSES, TWO_LABELS, num_classes=3)
    assert density.relative_jitter == 0.0
    assert density.counts.tolist() == [3, 0, 3]
    torch.testing.assert_close(density.means[0], torch.tensor([2 / 3, 2 / 3], dtype=torch.float64))
    torch.testing.assert_close(density.means[2], torch.tensor([16 / 3, 17 / 3], dtype=torch.float64))
    # class 0: deviations (-2/3,-2/3), (4/3,-2/3), (-2/3,4/3); sum of outer products / (3 - 1)
    expected = torch.tensor([[4 / 3, -2 / 3], [-2 / 3, 4 / 3]], dtype=torch.float64)
    torch.testing.assert_close(density.covariances[0], expected)
    assert torch.exp(density.log_priors()).tolist() == [0.5, 0.0, 0.5]


def test_mixture_log_density_is_the_closed_form_over_present_classes():
    density = fit_feature_density(TWO_CLASSES, TWO_LABELS, num_classes=3)
    z = torch.tensor([[1.0, 1.0], [4.0, 6.0], [-3.0, 9.0]], dtype=torch.float64)
    per_class = [multivariate_normal(density.means[c].numpy(), density.covariances[c].numpy()).logpdf(z.numpy())
                 for c in (0, 2)]
    torch.testing.assert_close(density.class_log_densities(z)[:, [0, 2]],
                               torch.tensor(np.stack(per_class, 1)), atol=1e-10, rtol=0)
    assert torch.isneginf(density.class_log_densities(z)[:, 1]).all()
    direct = np.log(0.5 * np.exp(per_class[0]) + 0.5 * np.exp(per_class[1]))
    torch.testing.assert_close(density.log_prob(z), torch.tensor(direct), atol=1e-10, rtol=0)


def test_one_present_class_gives_that_gaussian_and_absent_classes_change_nothing():
    only = fit_feature_density(TWO_CLASSES[:3], TWO_LABELS[:3], num_classes=1)
    wider = fit_feature_density(TWO_CLASSES[:3], TWO_LABELS[:3], num_classes=10)
    z = torch.randn(5, 2, dtype=torch.float64)
    gaussian = multivariate_normal(only.means[0].numpy(), only.covariances[0].numpy()).logpdf(z.numpy())
    torch.testing.assert_close(only.log_prob(z), torch.tensor(gaussian), atol=1e-10, rtol=0)
    torch.testing.assert_close(wider.log_prob(z), only.log_prob(z))


def test_degenerate_covariance_gets_the_smallest_jitter_that_factorises():
    collinear = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])  # rank-1 covariance
    density = fit_feature_density(collinear, torch.zeros(3, dtype=torch.long), num_classes=2)
    assert density.relative_jitter > 0
    log_p = density.log_prob(torch.tensor([[0.5, 0.5], [0.0, 3.0]]))
    assert torch.isfinite(log_p).all() and log_p[0] > log_p[1]


def test_a_class_with_one_sample_takes_the_pooled_within_class_covariance():
    features = torch.cat([TWO_CLASSES, torch.tensor([[9.0, 9.0]])])
    labels = torch.cat([TWO_LABELS, torch.tensor([1])])
    density = fit_feature_density(features, labels, num_classes=3)
    scatter = sum((TWO_CLASSES[TWO_LABELS == c] - TWO_CLASSES[TWO_LABELS == c].mean(0)).T.double()
                  @ (TWO_CLASSES[TWO_LABELS == c] - TWO_CLASSES[TWO_LABELS == c].mean(0)).double() for c in (0, 2))
    pooled = scatter / (7 - 3)  # n minus the number of classes present
    torch.testing.assert_close(density.covariances[1], pooled)
    torch.testing.assert_close(density.means[1], torch.tensor([9.0, 9.0], dtype=torch.float64))


def test_density_survives_its_upload_as_float32():
    density = fit_feature_density(torch.randn(50, 4), torch.randint(0, 3, (50,)), num_classes=3)
    rebuilt = FeatureDensity.from_message(density.to_message())
    z = torch.randn(7, 4, dtype=torch.float64)
    torch.testing.assert_close(rebuilt.log_prob(z), density.log_prob(z), atol=1e-4, rtol=1e-5)


def test_bad_features_or_labels_are_clear_errors():
    with pytest.raises(ValueError, match="labels must lie in"):
        fit_feature_density(torch.zeros(2, 3), torch.tensor([0, 5]), num_classes=3)
    with pytest.raises(ValueError, match="features must be"):
        fit_feature_density(torch.zeros(2, 3), torch.tensor([0]), num_classes=3)


# --- teacher weights, ensemble targets, BALD, selection (Eqs. 2b-4) -----------------------------

def test_teacher_weights_normalise_densities_across_teachers():
    torch.testing.assert_close(teacher_weights(torch.zeros(4, 3)), torch.full((4, 3), 0.25, dtype=torch.float64))
    w = teacher_weights(torch.tensor([[0.0], [-10.0]]))
    torch.testing.assert_close(w[:, 0], torch.tensor([1 / (1 + math.exp(-10)), math.exp(-10) / (1 + math.exp(-10))],
                                                     dtype=torch.float64))
    log_p = torch.randn(5, 8, dtype=torch.float64) * 30
    torch.testing.assert_close(teacher_weights(log_p + 123.0), teacher_weights(log_p))
    torch.testing.assert_close(teacher_weights(log_p).sum(0), torch.ones(8, dtype=torch.float64))
    hopeless = teacher_weights(torch.full((2, 1), -math.inf))
    torch.testing.assert_close(hopeless, torch.full((2, 1), 0.5, dtype=torch.float64))


def test_ensemble_targets_mix_logits_with_the_weights():
    logits = torch.randn(3, 6, 4)
    one_hot = torch.zeros(3, 6, dtype=torch.float64)
    one_hot[1] = 1.0
    torch.testing.assert_close(ensemble_targets(logits, one_hot), torch.softmax(logits[1], -1))
    uniform = torch.full((3, 6), 1 / 3, dtype=torch.float64)
    torch.testing.assert_close(ensemble_targets(logits, uniform), torch.softmax(logits.mean(0), -1))
    weights = torch.softmax(torch.randn(3, 6, dtype=torch.float64), 0)  # log-softmax inputs: same targets
    torch.testing.assert_close(ensemble_targets(torch.log_softmax(logits, -1), weights),
                               ensemble_targets(logits, weights))


def test_bald_is_the_mutual_information_of_the_teachers():
    same = torch.softmax(torch.randn(1, 5, 3), -1).expand(4, 5, 3)
    torch.testing.assert_close(bald_scores(same), torch.zeros(5, dtype=torch.float64), atol=1e-12, rtol=0)
    opposed = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    torch.testing.assert_close(bald_scores(opposed), torch.tensor([math.log(2)], dtype=torch.float64))
    assert float(bald_scores(torch.full((3, 1, 4), 0.25))) == 0.0
    probs = torch.softmax(torch.randn(5, 20, 10, dtype=torch.float64) * 3, -1)
    scores = bald_scores(probs)
    mean = probs.mean(0).numpy()
    direct = -(mean * np.log(mean)).sum(-1) + (probs.numpy() * np.log(probs.numpy())).sum(-1).mean(0)
    torch.testing.assert_close(scores, torch.tensor(direct))
    assert (scores >= 0).all() and (scores <= math.log(10)).all()


def test_selection_keeps_the_top_ceil_share_and_everything_at_ratio_one():
    scores = torch.tensor([0.1, 0.9, 0.5, 0.9, 0.0, 0.3, 0.7, 0.2, 0.6, 0.4])
    assert select_samples(scores, 0.25, "bald", np.random.default_rng(0)).tolist() == [1, 3, 6]  # ceil(2.5) = 3
    assert select_samples(scores, 1.0, "bald", np.random.default_rng(0)).tolist() == list(range(10))
    assert select_samples(scores, 1.0, "random", np.random.default_rng(0)).tolist() == list(range(10))
    draw = select_samples(scores, 0.4, "random", np.random.default_rng(7))
    assert len(draw) == 4 and draw.tolist() == select_samples(scores, 0.4, "random", np.random.default_rng(7)).tolist()
    with pytest.raises(ValueError, match="selection must be one of"):
        select_samples(scores, 0.5, "entropy", np.random.default_rng(0))
    with pytest.raises(ValueError, match="ratio must be in"):
        select_samples(scores, 0.0, "bald", np.random.default_rng(0))


def test_distillation_loss_vanishes_only_at_the_ensemble():
    logits = torch.randn(6, 10)
    targets = ensemble_targets(logits.unsqueeze(0), torch.ones(1, 6, dtype=torch.float64))
    assert float(kd_kl(logits, targets, 1.0, scale_by_t2=False)) == pytest.approx(0.0, abs=1e-6)
    assert float(kd_kl(logits + torch.randn(6, 10), targets, 1.0, scale_by_t2=False)) > 1e-3


# --- the step split at FedBE's proportions -----------------------------------------------------

def test_step_at_098_is_fedbe_shape():
    labels = np.repeat(np.arange(10), 4000)
    parts = step(labels, 10, major_classes=2, major_fraction=0.98, seed=3)
    histograms = class_histograms(labels, parts, 10)
    assert (histograms.sum(1) == 4000).all()
    counts = np.sort(histograms, axis=1)
    assert (counts[:, -2:] == 1960).all() and (counts[:, :-2] == 10).all()
    majors = (histograms == 1960).sum(0)
    assert (majors == 2).all()  # each class is major for exactly 2 clients


# --- the algorithms on tiny real data ----------------------------------------------------------

def tiny(algorithm: str, rounds: int = 1, **params) -> ExperimentConfig:
    return ExperimentConfig(
        algorithm=algorithm, algorithm_params=params,
        data=DataConfig(dataset="cifar10", num_clients=4, partition="step", pool_size=400, transfer_size=100,
                        local_test_size=20),
        model="cnn5", train=TrainConfig(epochs=1, batch_size=32, lr=0.02, momentum=0.9, mixed_precision=False),
        rounds=rounds, global_test_size=200, seed=1,
    )


def run_and_keep(config: ExperimentConfig):
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=torch.device("cpu"), seed=config.seed)
    algorithm = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    torch.manual_seed(0)
    uploads = {}
    for round_index in range(1, config.rounds + 1):
        algorithm.begin_round(round_index)
        uploads = {k: algorithm.client_update(k, algorithm.download(k)) for k in range(data.num_clients)}
        algorithm.server_update(uploads)
    return algorithm, uploads


def assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


def test_fedua_with_uniform_weights_and_all_samples_is_feddf():
    fedua, _ = run_and_keep(tiny("fedua", 2, server_epochs=1, weighting="uniform", sample_ratio=1.0))
    feddf, _ = run_and_keep(tiny("feddf", 2, server_epochs=1))
    assert_same_state(fedua.global_model(), feddf.global_model())


def test_feddf_without_server_epochs_is_fedavg():
    feddf, _ = run_and_keep(tiny("feddf", 2, server_epochs=0))
    fedavg, _ = run_and_keep(tiny("fedavg", 2))
    assert_same_state(feddf.global_model(), fedavg.global_model())


def test_distillation_brings_the_student_closer_to_the_ensemble_than_fedavg():
    config = tiny("feddf", 1, server_epochs=5, server_lr=0.05)
    feddf, uploads = run_and_keep(replace(config, train=replace(config.train, epochs=4, lr=0.05)))
    fedavg, _ = run_and_keep(tiny("feddf", 1, server_epochs=0))
    outputs = feddf.teacher_outputs(uploads)
    targets = ensemble_targets(outputs.logits, feddf.teacher_weights(outputs, uploads))
    data = feddf.ctx.data

    def kl_to_targets(model):
        from fedkd_core.training import predict
        return float(kd_kl(predict(model, data.dataset, data.transfer), targets, 1.0, scale_by_t2=False))

    fedavg.server_update(uploads)  # the FedAvg of the same uploads
    assert kl_to_targets(feddf.model) < 0.8 * kl_to_targets(fedavg.model)


def test_fedua_upload_is_the_model_plus_the_gda():
    fedua, fedua_uploads = run_and_keep(tiny("fedua", 1, server_epochs=1))
    _, feddf_uploads = run_and_keep(tiny("feddf", 1, server_epochs=1))
    classes, dim = 10, 84  # cnn5's penultimate layer
    extra = classes * dim * 4 + classes * dim * dim * 4 + classes * 8 + 4  # means, covariances, counts, jitter
    assert message_bytes(fedua_uploads[0]) - message_bytes(feddf_uploads[0]) == extra
    metrics = fedua.round_metrics()
    assert metrics["teachers"] == [0, 1, 2, 3]
    assert metrics["distilled_samples"] == math.ceil(0.6 * 100)
    assert len(metrics["density_entropy"]) == 4 and len(metrics["density_entropy"][0]) == 10


def test_fedua_is_deterministic_under_a_seed():
    a, _ = run_and_keep(tiny("fedua", 1, server_epochs=1))
    b, _ = run_and_keep(tiny("fedua", 1, server_epochs=1))
    assert_same_state(a.global_model(), b.global_model())


def test_all_three_methods_learn_on_real_cifar10():
    base = ExperimentConfig(
        algorithm="fedavg",
        data=DataConfig(dataset="cifar10", num_clients=4, partition="dirichlet", alpha=0.5, pool_size=2000,
                        transfer_size=500, local_test_size=20),
        model="cnn5", train=TrainConfig(epochs=2, batch_size=32, lr=0.02, momentum=0.9, mixed_precision=False),
        rounds=3, global_test_size=1000, seed=0,
    )
    from fedkd_core.conformance import majority_scores

    majority = majority_scores(build_federated_data(base.data, base.seed))
    for algorithm in ("fedavg", "feddf", "fedua"):
        params = {} if algorithm == "fedavg" else {"server_epochs": 2}
        history = simulate(replace(base, algorithm=algorithm, algorithm_params=params), progress=False)["history"]
        # above answering the pool's largest class everywhere (0.10 on the balanced test split)
        assert history[-1]["global_acc"] > majority["global_acc"] + 0.1, (algorithm, history[-1]["global_acc"])


# --- the chapter ---------------------------------------------------------------------------------

def test_reduced_grid_covers_tables_1_to_3_once():
    configs = chapter.experiments(chapter.REDUCED_PROFILE)
    cells = [chapter.cell_of(c) for c in configs]
    assert len(configs) == len({repr(c) for c in configs})
    # Table 2: 3 partitions x 3 methods; Table 3: 2 more C x 3 methods; Table 1: 2 rules x 4 ratios < 1
    assert len(configs) == (9 + 6 + 8) * 3
    assert ("step", 1.0, "feddf", "all", 1.0) in cells  # Random@1.0 = BALD@1.0 = FedDF
    assert ("step", 0.4, "fedua", "bald", 0.6) in cells
    assert configs[0].seed == 0 and configs[-1].seed == 2


def test_bad_chapter_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="partitions must be 'step' or 'dir<alpha>'"):
        chapter.Params(partitions="step,dirichlet")
    with pytest.raises(ValueError, match="algorithms must be among"):
        chapter.Params(algorithms="fedavg,fedbe")
    with pytest.raises(ValueError, match="table1_selections"):
        chapter.Params(table1_selections="entropy")


def test_paper_tables_and_printed_changes_agree():
    """The paper's tables, cell by cell: tests/test_paper_tables.py."""
    table2 = chapter.paper_table2().set_index(["partition", "algorithm"])["mean"]
    printed = chapter.paper_changes().set_index(["row", "algorithm", "column"]).printed
    for method in ("feddf", "fedua"):
        change = chapter.relative_changes(table2.xs(method, level="algorithm"), table2.xs("fedavg", level="algorithm"))
        expected = printed.xs(("change vs FedAvg", method)).reindex(change.index)
        assert expected.notna().all() and np.allclose(change.round(1), expected, atol=0.1)


def test_printed_check_finds_the_three_percentages_that_do_not_round_from_the_accuracies():
    check = chapter.printed_check()
    assert len(check) == 18
    off = check[~check.agrees].set_index(["row", "algorithm", "column"])
    # FedAvg step -> Dir(0.1): (59.6 - 62.6) / 62.6 = -4.79% (printed -4.7, truncated); FedDF over
    # FedAvg at Dir(0.1): (64.4 - 59.6) / 59.6 = 8.054% (printed 8.0, truncated); FedDF C = 0.7:
    # 1 - 68.1/72.3 = 5.81% (printed 5.9)
    assert sorted(off.index) == [("accuracy drop", "feddf", "C = 0.7"), ("change vs FedAvg", "feddf", "dir0.1"),
                                 ("change vs step", "fedavg", "dir0.1")]
    assert off.loc[("change vs step", "fedavg", "dir0.1"), "computed"] == pytest.approx((59.6 - 62.6) / 62.6 * 100, abs=0.01)
    # the paper prints FedDF's step -> Dir(0.1) as a whole "−11%": -10.93% rounds to it
    whole = check.set_index(["row", "algorithm", "column"]).loc[("change vs step", "feddf", "dir0.1")]
    assert whole.printed == -11 and whole.computed == pytest.approx(-10.93) and whole.agrees


def test_a_change_agrees_at_the_precision_the_paper_printed_it_with():
    computed, printed = pd.Series([-10.93, -10.93, 8.054, 8.054]), pd.Series([-11.0, -10.9, 8.0, 8.1])
    assert list(chapter.rounds_to(computed, printed, pd.Series([0, 1, 1, 1]))) == [True, True, False, True]
    assert list(chapter.rounds_to(computed[:1], pd.Series([-11.0]), pd.Series([1]))) == [False]


def test_derived_rows_from_hand_made_means():
    table2 = pd.DataFrame({"partition": ["step", "dir0.1"] * 2, "algorithm": ["fedavg"] * 2 + ["fedua"] * 2,
                           "mean": [50.0, 40.0, 60.0, 30.0]})
    table3 = pd.DataFrame({"participation": [1.0, 0.4, 1.0, 0.4], "algorithm": ["fedavg"] * 2 + ["fedua"] * 2,
                           "mean": [50.0, 45.0, 60.0, 48.0]})
    rows = chapter.derived_rows(table2, table3).set_index(["row", "algorithm", "column"])["value"]
    assert rows[("change vs step", "fedavg", "dir0.1")] == pytest.approx(-20.0)
    assert rows[("change vs step", "fedua", "dir0.1")] == pytest.approx(-50.0)
    assert rows[("change vs FedAvg", "fedua", "step")] == pytest.approx(20.0)
    assert rows[("change vs FedAvg", "fedua", "dir0.1")] == pytest.approx(-25.0)
    assert rows[("accuracy drop", "fedavg", "C = 0.4")] == pytest.approx(10.0)
    assert rows[("accuracy drop", "fedua", "C = 0.4")] == pytest.approx(20.0)


def sign_counts(module, frame):
    """Per claim: (cells where it holds, cells) by the sign of each cell's effect."""
    from fedkd_core.verdicts import paper_verdicts

    verdicts = paper_verdicts(frame.assign(std=float("nan")), module.effects_of, list(module.EFFECT_CELL_KEYS), runs=1)
    return {claim: [v.holding, v.cells] for claim, v in verdicts.items()}


def test_claims_are_effects_that_hold_where_they_are_positive():
    rows = ([("step", 1.0, 1.0, m, v) for m, v in zip(("fedavg", "feddf", "fedua"), (50, 55, 60))]
            + [("dir0.1", 1.0, 1.0, m, v) for m, v in zip(("fedavg", "feddf", "fedua"), (50, 45, 60))]
            + [("step", 0.4, 1.0, m, v) for m, v in zip(("fedavg", "feddf", "fedua"), (45, 30, 57))]
            + [("step", 1.0, r, m, v) for r, m, v in ((0.2, "random", 50), (0.2, "bald", 52), (0.6, "random", 53),
                                                       (0.6, "bald", 51))])
    frame = pd.DataFrame(rows, columns=["partition", "participation", "ratio", "method", "mean"])
    counted = sign_counts(chapter, frame)
    assert counted["FedUA > FedDF > FedAvg"] == [1, 2]  # dir0.1: FedDF < FedAvg
    assert counted["BALD > Random at equal SR"] == [1, 2]
    assert counted["FedUA loses less than FedDF as C falls"] == [1, 1]  # drops 45% vs 5%
    assert counted["FedUA best at every C"] == [2, 2]
    paper = sign_counts(chapter, chapter.paper_observations())
    assert paper["FedUA > FedDF > FedAvg"] == [3, 3] and paper["BALD > Random at equal SR"] == [4, 4]


def test_table1_rows_let_the_whole_set_run_stand_in_both_rows():
    frame = pd.DataFrame({"algorithm": ["feddf"] * 3 + ["fedua"], "partition": ["step"] * 4,
                          "participation": [1.0] * 4, "selection": ["all", "bald", "random", "all"],
                          "ratio": [1.0, 0.2, 0.2, 1.0], "global_acc": [50.0, 40.0, 41.0, 60.0]})
    rows = chapter.table1_rows(frame)
    assert sorted(zip(rows.selection, rows.ratio)) == [("bald", 0.2), ("bald", 1.0), ("random", 0.2), ("random", 1.0)]
    assert set(rows[rows.ratio == 1.0].global_acc) == {50.0}


def test_only_runs_of_the_reduced_method_stand_in_for_cells():
    same = chapter.Params(partitions="step", table1_ratios="")
    assert chapter.method_differences(same) == []
    config = chapter.table2_grid(same, 0)[0]
    covered = [SimpleNamespace(config=config.resolved())]
    assert chapter.experiments_to_run(same, covered) == chapter.experiments(same)[1:]
    other = chapter.Params(partitions="step", table1_ratios="", server_lr=0.01)
    assert chapter.method_differences(other) == ["server_lr"]
    assert chapter.experiments_to_run(other, covered) == chapter.experiments(other)
    assert chapter.experiments_to_run(replace(same, reuse_reduced=False), covered) == chapter.experiments(same)


def test_the_notebook_says_when_no_reduced_record_stands_for_a_cell():
    other = chapter.Params(partitions="step", table1_ratios="", server_lr=0.01)
    message = reuse_message(other, chapter.method_differences(other))
    assert "server_lr" in message and "reduced" in message
    assert reuse_message(chapter.Params(), chapter.method_differences(chapter.Params())) == ""
    assert reuse_message(replace(other, profile="paper"), ["server_lr"]) == ""


@pytest.mark.parametrize("weighting", ["density", "density_std"])
def test_each_teacher_is_weighted_by_its_own_density_of_its_own_features(weighting):
    fedua, uploads = run_and_keep(tiny("fedua", 1, server_epochs=1, weighting=weighting))
    outputs = fedua.teacher_outputs(uploads)
    log_p = []
    for k, z in zip(outputs.clients, outputs.features):
        value = FeatureDensity.from_message(uploads[k]).log_prob(z)
        if weighting == "density_std":
            mean, std = uploads[k]["gda_logp_stats"].double().tolist()
            value = (value - mean) / std
        log_p.append(value)
    expected = torch.softmax(torch.stack(log_p), dim=0)
    torch.testing.assert_close(fedua.teacher_weights(outputs, uploads), expected)
    assert fedua.round_metrics()["mean_max_weight"] == pytest.approx(float(expected.max(0).values.mean()), rel=1e-6)


def test_distillation_pairs_each_kept_sample_with_its_own_target(monkeypatch):
    from torch import nn

    from fedkd_core.algorithms import feddf as module

    config = tiny("feddf", 1, server_epochs=1, selection="bald", sample_ratio=0.5)
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=torch.device("cpu"), seed=1)
    feddf = algorithm_class("feddf")(algorithm_config("feddf", config.algorithm_params), ctx)
    captured = {}
    monkeypatch.setattr(module, "train", lambda model, dataset, indices, cfg, **kw: captured.update(indices=indices, **kw))
    targets = torch.softmax(torch.randn(len(data.transfer), 10), -1)
    kept = np.array([3, 7, 9, 40])
    feddf.distil(targets, kept)
    assert captured["indices"].tolist() == data.transfer[kept].tolist() and captured["augment"] is False

    class Fixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.logits = torch.randn(2, 10)

        def forward(self, x):
            return self.logits

    student = Fixed()
    batch = module.Batch(torch.zeros(2, 3, 32, 32), torch.zeros(2, dtype=torch.long), torch.tensor([2, 0]))
    expected = kd_kl(student.logits, targets[[9, 3]], 1.0, scale_by_t2=False)  # positions 2, 0 of kept
    torch.testing.assert_close(captured["loss_fn"](student, batch), expected)


def test_rank_deficient_density_survives_its_float32_upload():
    """Fewer images than feature dimensions (the paper's minor classes: 10 images, 64-d): the
    client needs a jitter, the rounded upload may need more, and the density keeps its shape."""
    generator = torch.Generator().manual_seed(3)
    features = torch.cat([torch.randn(6, 16, generator=generator), torch.randn(6, 16, generator=generator) + 4])
    labels = torch.tensor([0] * 6 + [1] * 6)
    density = fit_feature_density(features, labels, num_classes=2)
    rebuilt = FeatureDensity.from_message(density.to_message())
    assert density.relative_jitter > 0 and rebuilt.relative_jitter >= density.relative_jitter
    near, far = features[:3].double(), features[:3].double() + 20
    for model in (density, rebuilt):
        assert torch.isfinite(model.log_prob(near)).all() and (model.log_prob(near) > model.log_prob(far)).all()
    torch.testing.assert_close(rebuilt.posterior(near), density.posterior(near), atol=1e-3, rtol=0)


def test_resnet32_upload_is_its_parameters_and_batchnorm_buffers():
    from torch import nn

    from fedkd_core.models import InputShape, make_model

    model = make_model("resnet32", InputShape(3, 32, 10), seed=0)
    batchnorms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    expected = 4 * sum(p.numel() for p in model.parameters()) + sum(8 * m.num_features + 8 for m in batchnorms)
    assert message_bytes(dict(model.state_dict())) == expected == 1_877_744


@pytest.mark.parametrize("algorithm", ["feddf", "fedua"])
def test_with_partial_participation_only_the_round_s_clients_teach(algorithm):
    from fedkd_core.experiment import select_clients

    config = replace(tiny(algorithm, 3, server_epochs=1), participation=0.5)
    result = simulate(config, progress=False)
    sampler = np.random.default_rng([config.seed, 2])  # the run's own client sampler, replayed
    selected = [sorted(select_clients(sampler, 4, 0.5)) for _ in range(config.rounds)]
    assert [row["teachers"] for row in result["history"]] == selected
    assert all(row["clients"] == 2 for row in result["history"]) and len({tuple(s) for s in selected}) > 1


# --- what the chapter shows of each profile ----------------------------------------------------

def test_the_split_table_has_a_row_per_profile_shown_that_runs_a_step_split():
    quick = chapter.Params(**yaml.safe_load((Path(__file__).resolve().parents[1] / "notebooks/params/quick/fedua.yaml")
                                            .read_text()))
    profiles = chapter.profiles_shown(quick)
    assert list(profiles) == ["quick profile (this page)", "reduced profile (the committed records)"]
    assert list(chapter.profiles_shown(chapter.REDUCED_PROFILE)) == ["reduced profile (this page; the committed records)"]
    table = chapter.step_checks(profiles).set_index("profile")
    quick_row, reduced_row = table.loc["quick profile (this page)"], table.loc["reduced profile (the committed records)"]
    assert quick_row["per client"].endswith("–100") and reduced_row["per client"].endswith("–2000")  # pool / clients
    assert reduced_row["minor images"] == "0–5"
    no_step = replace(chapter.Params(), profile="other", partitions="dir0.5")
    assert chapter.step_checks({"other": no_step}).empty
    assert chapter.partition_names(replace(chapter.Params(), partitions="step, dir0.1")) == ["step", "dir0.1"]


def test_jitter_counts_are_client_fits_per_profile_partition_and_jitter():
    def record(algorithm, partition, jitters, profile="reduced"):
        config = chapter.run_config(replace(chapter.Params(), partitions=partition), algorithm, partition, 1.0, 0)
        return SimpleNamespace(config=config.resolved(), profile=profile,
                               history=[{"round": r, "gda_jitter": j} for r, j in enumerate(jitters)])

    records = [record("fedua", "step", [[0.0, 0.0], [0.0, 1.0000001e-6]]),
               record("fedua", "dir0.1", [[1e-6, 9.9999997e-7]]),
               record("feddf", "step", [[1e-3, 1e-3]])]  # not FedUA: no GDA
    counts = chapter.jitter_counts(records)
    assert counts.values.tolist() == [["reduced", "dir0.1", 1e-6, 2], ["reduced", "step", 0.0, 3],
                                      ["reduced", "step", 1e-6, 1]]
    assert chapter.jitter_counts([]).empty


def test_the_local_lr_schedule_is_named_with_the_rounds_it_decays_at():
    assert chapter.lr_schedule_text(replace(chapter.Params(), rounds=40, local_lr_decay="0.3,0.6")) == \
        "×0.1 at rounds 13 and 25 of 40 (after 30% and 60% of the rounds)"
    # 2 rounds: the 30% decay waits for a whole round (after 50% of the rounds), the 60% one never comes
    assert chapter.lr_schedule_text(replace(chapter.Params(), rounds=2, local_lr_decay="0.3,0.6")) == \
        "×0.1 at round 2 of 2 (after 50% of the rounds); the 30% decay is rounded up to a whole round; " \
        "the 60% decay would come at round 3, after the last round"
    assert chapter.lr_schedule_text(replace(chapter.Params(), rounds=3, local_lr_decay="0.3,0.6")) == \
        "×0.1 at rounds 2 and 3 of 3 (after 33% and 67% of the rounds); the 30% and 60% decays are rounded up " \
        "to a whole round"
    assert chapter.lr_schedule_text(replace(chapter.Params(), rounds=5, local_lr_decay="0.9")) == \
        "constant (the 90% decay would come at round 6, after the last round)"
    assert chapter.lr_schedule_text(replace(chapter.Params(), local_lr_decay="")) == "constant"


def test_the_open_choices_table_gives_the_reduced_profile_and_this_pages_profile():
    quick = chapter.Params()  # the smoke defaults: 2 rounds, not the records' 40
    columns = chapter.choices_columns(quick)
    assert list(columns) == ["reduced profile (the committed records)", "smoke profile (this page)"]
    table = chapter.open_choices_table(quick).set_index("choice")
    assert list(table.columns) == ["paper", *columns, "source"]
    schedule = table.loc["local lr schedule"]
    assert schedule[list(columns)].tolist() == [chapter.lr_schedule_text(chapter.REDUCED_PROFILE),
                                               chapter.lr_schedule_text(quick)]
    assert schedule.iloc[1].startswith("×0.1 at rounds 13 and 25 of 40")
    # values are read from each profile: a changed server lr shows in its column only
    changed = chapter.open_choices_table(replace(quick, server_lr=0.01)).set_index("choice")
    assert changed.loc["server step size"].tolist()[1:3] == ["lr 0.001 on batch-mean KL", "lr 0.01 on batch-mean KL"]
    assert list(chapter.choices_columns(chapter.REDUCED_PROFILE)) == \
        ["reduced profile (the committed records; this page)"]


def test_the_plateau_check_reads_fedavg_at_full_participation_against_the_papers_table_2():
    def record(partition, curve, seed=0, algorithm="fedavg", participation=1.0):
        params = replace(chapter.Params(), partitions=partition, rounds=len(curve))
        config = chapter.run_config(params, algorithm, partition, participation, seed)
        history = [{"round": r + 1, "global_acc": a} for r, a in enumerate(curve)]
        return SimpleNamespace(config=config.resolved(), profile="reduced", history=history,
                               final=history[-1], environment={})

    flat, rising = [0.40] * 10, [0.30 + 0.02 * r for r in range(10)]  # rising: +2 points a round at the end
    records = [record("step", flat), record("step", [0.42] * 10, seed=1), record("dir0.1", rising),
               record("step", rising, algorithm="feddf"), record("step", rising, participation=0.4)]
    check = chapter.plateau_check(records).set_index("partition")
    assert check.loc["step", "seeds"] == 2 and check.loc["step", "FedAvg (%)"] == pytest.approx(41.0)
    assert check.loc["step", "0.6 × paper"] == pytest.approx(0.6 * 62.6) and check.loc["step", "reaches it"]
    assert check.loc["step", "below 1"] and not check.loc["dir0.1", "below 1"]  # only FedAvg at C = 1 is read
    assert check.loc["dir0.1", "fewest evaluations"] == 10 and check.loc["dir0.1", "≥ 10"]
    assert not chapter.plateau_check(records, floor=0.7).set_index("partition").loc["step", "reaches it"]  # 41 < 43.8
    late = "mean late gain (points, last 20%)"
    two = chapter.plateau_check([record("dir0.5", rising), record("dir0.5", flat, seed=1)]).set_index("partition")
    assert two.loc["dir0.5", late] == pytest.approx((4.0 + 0.0) / 2)  # the mean over seeds, not the largest
    assert chapter.plateau_check([]).empty


def test_the_quick_profile_and_the_defaults_run_the_reduced_profiles_method():
    """So that they show the committed reduced records instead of rerunning their cells; the paper
    profile differs only in the network."""
    from fedkd_core.chapters.datafiles import profile

    assert chapter.method_differences(chapter.Params()) == []
    assert chapter.method_differences(profile(chapter.Params, "quick/fedua.yaml")) == []
    assert chapter.method_differences(profile(chapter.Params, "paper/fedua.yaml")) == ["model"]


def test_the_gda_feature_width_is_read_from_the_network():
    assert chapter.feature_dimension("cnn5") == 84 and chapter.feature_dimension("resnet32") == 64
