"""FedCKD and its baselines: Eq. (4) on hand-made logits, annealing, partial sharing, a real run."""

from __future__ import annotations

import math
import re
from dataclasses import fields, replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch.nn import functional as F

from fedkd_core import tables
from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.fedckd import annealed_lambda, fedckd_loss
from fedkd_core.algorithms.fedfomo import fomo_weights, normalised_positive
from fedkd_core.chapters import fedckd as chapter
from fedkd_core.experiment import ExperimentConfig, simulate
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.training import TrainConfig

STUDENT = torch.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 0.3]])
GLOBAL = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 2.0, 0.5]])
HISTORY = torch.tensor([[3.0, -1.0, 0.0], [0.2, 0.1, 2.0]])
LABELS = torch.tensor([0, 2])


def by_hand_kl(p: list[float], q: list[float]) -> float:
    """KL(p ‖ q) = Σ p log(p / q)."""
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def softmax(row, tau):
    e = [math.exp(v / tau) for v in row]
    return [v / sum(e) for v in e]


def eq4_by_hand(lam: float, tau: float, teacher_first: bool) -> float:
    """Eq. (4) written out sample by sample with the documented choices (τ² scaling)."""
    total = 0.0
    for s, g, h, y in zip(STUDENT.tolist(), GLOBAL.tolist(), HISTORY.tolist(), LABELS.tolist()):
        ce = -math.log(softmax(s, 1.0)[y])
        ps, pg, ph = softmax(s, tau), softmax(g, tau), softmax(h, tau)
        kl = (lambda t: by_hand_kl(t, ps)) if teacher_first else (lambda t: by_hand_kl(ps, t))
        total += ce + lam * tau**2 * (kl(pg) + kl(ph))
    return total / len(LABELS)


@pytest.mark.parametrize("direction,teacher_first", [("teacher_student", True), ("student_teacher", False)])
def test_fedckd_loss_is_eq4(direction, teacher_first):
    loss = fedckd_loss(STUDENT, LABELS, [GLOBAL, HISTORY], lam=0.5, temperature=3.0, kl_direction=direction)
    assert float(loss) == pytest.approx(eq4_by_hand(0.5, 3.0, teacher_first), rel=1e-5)


def test_fedckd_loss_without_teachers_or_scaling():
    assert float(fedckd_loss(STUDENT, LABELS, [], 0.5, 3.0)) == pytest.approx(float(F.cross_entropy(STUDENT, LABELS)))
    scaled = fedckd_loss(STUDENT, LABELS, [GLOBAL], 0.5, 3.0, scale_t2=True) - F.cross_entropy(STUDENT, LABELS)
    plain = fedckd_loss(STUDENT, LABELS, [GLOBAL], 0.5, 3.0, scale_t2=False) - F.cross_entropy(STUDENT, LABELS)
    assert float(scaled) == pytest.approx(9.0 * float(plain), rel=1e-5)


def test_annealed_lambda_per_round():
    assert [annealed_lambda(0.5, 0.99, t) for t in (1, 2, 3, 51)] == pytest.approx(
        [0.5, 0.495, 0.5 * 0.99**2, 0.5 * 0.99**50])
    assert annealed_lambda(0.5, 1.0, 40) == 0.5


def make_ctx(num_clients=3, pool=300, model="cnn5", dataset="fashion_mnist"):
    data = build_federated_data(DataConfig(dataset=dataset, num_clients=num_clients, alpha=0.1, pool_size=pool,
                                           local_test_size=50), seed=0)
    return Context(data=data, model_name=model, train=TrainConfig(epochs=1, batch_size=64, lr=0.05),
                   device=torch.device("cpu"), seed=0)


def test_fedckd_uses_the_annealed_lambda_and_both_teachers(monkeypatch):
    ctx = make_ctx()
    algorithm = algorithm_class("fedckd")(algorithm_config("fedckd", {}), ctx)
    seen = []
    import fedkd_core.algorithms.fedckd as module

    def spy(student, labels, teachers, lam, *args):
        seen.append((len(teachers), lam))
        return F.cross_entropy(student.float(), labels)

    monkeypatch.setattr(module, "fedckd_loss", spy)
    for round_index in (1, 2, 3):
        algorithm.begin_round(round_index)
        algorithm.server_update({0: algorithm.client_update(0, algorithm.download(0))})
    teachers = {t for t, _ in seen[: len(seen) // 3]}, {t for t, _ in seen[len(seen) // 3:]}
    assert teachers == ({1}, {2})  # first participation: global teacher only; then global + historical
    assert sorted({lam for _, lam in seen}) == pytest.approx([0.5 * 0.99**2, 0.5 * 0.99, 0.5])


@pytest.mark.parametrize("name,shared,personal", [("fedper", "features.", "head."), ("lg_fedavg", "head.", "features.")])
def test_partial_sharing_sends_exactly_the_shared_part(name, shared, personal):
    ctx = make_ctx()
    algorithm = algorithm_class(name)(algorithm_config(name, {}), ctx)
    algorithm.begin_round(1)
    uploads = {k: algorithm.client_update(k, algorithm.download(k)) for k in range(3)}
    expected = {n for n in ctx.initial_model.state_dict() if n.startswith(shared)}
    assert all(set(u) == expected for u in uploads.values())
    assert set(algorithm.download(0)) == expected
    algorithm.server_update(uploads)
    states = [algorithm.personal_model(k).state_dict() for k in range(3)]
    for n in states[0]:
        if n.startswith(shared):  # everyone holds the averaged shared part
            assert all(torch.equal(states[0][n], s[n]) for s in states[1:])
    personal_names = [n for n in states[0] if n.startswith(personal)]
    assert personal_names and all(not torch.equal(states[0][n], states[1][n]) for n in personal_names)


def test_fomo_weights_keep_positive_gains_only():
    raw = fomo_weights(1.0, [0.5, 1.5, 0.8], [1.0, 1.0, 0.2])
    assert raw.tolist() == pytest.approx([0.5 / (1 + 1e-5), -0.5 / (1 + 1e-5), 0.2 / (0.2 + 1e-5)], rel=1e-6)
    assert normalised_positive(raw).tolist() == pytest.approx([1 / 3, 0.0, 2 / 3], rel=1e-4)
    assert normalised_positive(torch.tensor([-1.0, 0.0])) is None


def test_every_baseline_runs_one_round():
    ctx = make_ctx(num_clients=2, pool=200)
    for name in ("fedprox", "pfedme", "fedfomo"):
        algorithm = algorithm_class(name)(algorithm_config(name, {}), ctx)
        algorithm.begin_round(1)
        algorithm.server_update({k: algorithm.client_update(k, algorithm.download(k)) for k in range(2)})
        assert algorithm.personal_model(0)(torch.zeros(1, 1, 28, 28)).shape == (1, 10)


def test_fedckd_and_pfedsd_beat_fedavg_on_fashion_mnist():
    """Practical setting, Dir(0.1): personalised distillation beats the single global model.
    (The 5-layer CNN instead of pFedSD's FMNIST CNN, which is 3x slower on a CPU.) FedCKD learns:
    it beats always answering each client's largest class (0.47 at Dir(0.1), where 1/C is 0.1).
    With one local epoch it did not (FedCKD 0.44, pFedSD 0.43: a "> 0.3" passed regardless); with two,
    measured (seed 0, bf16 where native, AMD EPYC): FedAvg 0.21, pFedSD 0.47, FedCKD 0.61."""
    from fedkd_core.conformance import majority_scores
    from fedkd_core.federation import build_federated_data

    data = DataConfig(dataset="fashion_mnist", num_clients=5, partition="dirichlet", alpha=0.1, pool_size=1000,
                      local_test_size=100)
    train = TrainConfig(epochs=2, batch_size=64, lr=0.05, momentum=0.9, weight_decay=1e-5, mixed_precision=True)
    alma = {}
    for name in ("fedavg", "pfedsd", "fedckd"):
        config = ExperimentConfig(algorithm=name, data=data, model="cnn5", train=train, rounds=3, eval_every=3,
                                  global_test_size=100, seed=0)
        alma[name] = simulate(config, progress=False)["history"][-1]["alma"]
    assert alma["fedckd"] > alma["fedavg"] + 0.05 and alma["pfedsd"] > alma["fedavg"] + 0.05, alma
    majority = majority_scores(build_federated_data(data, 0))["alma"]
    assert alma["fedckd"] > majority + 0.08, (alma, majority)


@pytest.mark.parametrize("name,params", [("fedckd", {"gamma": 0.0}), ("fedckd", {"kl_direction": "sideways"}),
                                         ("fedckd", {"temperature": -1}), ("pfedsd", {"lam": -0.5}),
                                         ("fedprox", {"mu": -1}), ("pfedme", {"inner_steps": 0}),
                                         ("fedfomo", {"val_fraction": 1.0}), ("fedckd", {"first_round": "none"})])
def test_bad_algorithm_parameters_raise(name, params):
    with pytest.raises(ValueError):
        algorithm_config(name, params)


@pytest.mark.parametrize("field,value", [("datasets", "svhn"), ("settings", "iid"), ("scenarios", "20:2.0:50"),
                                         ("scenarios", "twenty"), ("alpha", 0.0), ("algorithms", "fedsd"),
                                         ("seeds", 0), ("sensitivity_alphas", "0.1,-1")])
def test_bad_chapter_parameters_raise(field, value):
    with pytest.raises(ValueError, match=field.split("_")[0]):
        chapter.Params(**{field: value})


def test_chapter_grids():
    params = chapter.Params(datasets="fashion_mnist,cifar10", settings="practical,pathological",
                            scenarios="20:1.0:50,100:0.1:100", algorithms=",".join(chapter.METHODS), seeds=3,
                            annealing_datasets="cifar10", sensitivity_dataset="cifar10")
    assert len(chapter.main_grid(params)) == 2 * 2 * 2 * 8 * 3
    assert {c.data.partition for c in chapter.main_grid(params)} == {"dirichlet", "pathological"}
    assert {c.algorithm_params.get("gamma") for c in chapter.annealing_grid(params)} == {0.99, 1.0}
    assert len(chapter.sensitivity_grid(params)) == 8 * 8 * 3
    assert len(chapter.experiments(params)) < len(chapter.main_grid(params)) + 2 * 3 + 8 * 8 * 3  # deduplicated
    # the paper's tables, cell by cell: tests/test_paper_tables.py


def test_reduced_records_stand_in_for_cells_of_the_same_method_only():
    from dataclasses import replace
    from types import SimpleNamespace

    quick = chapter.Params(scenarios="20:1.0:5", settings="practical,pathological", algorithms="pfedsd,fedckd",
                           pool_size=2000, local_epochs=2)
    assert chapter.method_differences(quick) == []
    reduced = chapter.main_grid(chapter.REDUCED_PROFILE)
    covering = [SimpleNamespace(config=c.resolved()) for c in reduced if c.algorithm == "fedckd"]
    stored = {"main": covering}
    left = chapter.experiments_to_run(quick, stored)
    assert {c.algorithm for c in left} == {"pfedsd"} and len(left) == 2  # the rounds and pool differ: same cells
    assert chapter.records_and_runs(quick, stored)["main"][0] == covering
    other = replace(quick, kl_direction="student_teacher")
    assert chapter.method_differences(other) == ["kl_direction"]
    assert chapter.experiments_to_run(other, stored) == chapter.experiments(other)
    assert chapter.records_and_runs(other, stored)["main"][0] == covering  # shown beside, labelled, but not reused
    assert chapter.experiments_to_run(replace(quick, reuse_reduced=False), stored) == chapter.experiments(quick)
    assert chapter.experiments_to_run(chapter.REDUCED_PROFILE, stored) == chapter.experiments(chapter.REDUCED_PROFILE)
    with pytest.raises(ValueError, match="profile 'reduced'.*kl_direction"):
        chapter.experiments_to_run(replace(chapter.REDUCED_PROFILE, kl_direction="student_teacher"), stored)
    assert chapter.cell_of(covering[0]) == chapter.cell_of(reduced[[c.algorithm for c in reduced].index("fedckd")])


def test_a_table5_cell_that_is_a_reduced_main_cell_is_shown_not_dropped():
    from types import SimpleNamespace

    params = chapter.Params(scenarios="20:1.0:5", algorithms="fedckd", sensitivity_dataset="fashion_mnist",
                            sensitivity_alphas="0.1,1.0", sensitivity_participations="1.0", sensitivity_models="resnet8")
    practical = [c for c in chapter.main_grid(chapter.REDUCED_PROFILE)
                 if c.algorithm == "fedckd" and c.data.partition == "dirichlet"]
    stored = {"main": [SimpleNamespace(config=c.resolved()) for c in practical]}
    plan = chapter.records_and_runs(params, stored)
    shown, to_run = plan["sensitivity"]
    assert len(shown) == len(practical)  # alpha 0.1, r = 1, the CNN: the main cell
    assert sorted((c.data.alpha, c.model) for c in to_run) == [(0.1, "resnet8"), (1.0, "pfedsd_cnn_mnist")]
    assert plan["main"] == (stored["main"], [])


def test_the_paper_scale_fashion_mnist_column_has_the_full_profiles_keys():
    """The n = 100 column's sweep writes records the full paper profile would write (same keys),
    and the ledger reads exactly them."""
    from pathlib import Path

    import yaml

    from fedkd_core.results import config_hash

    params_dir = Path(__file__).resolve().parents[1] / "notebooks" / "params" / "paper"
    column = chapter.PAPER_FMNIST100  # notebooks/params/paper/fedckd_fmnist100.yaml (tests/test_profiles.py)
    full = chapter.Params(**yaml.safe_load((params_dir / "fedckd.yaml").read_text()))
    grid = chapter.grids(column)
    main = {config_hash(c) for c in grid["main"]}
    extra = {config_hash(c) for c in grid["annealing"]} - main  # Table IV's γ = 1 on Fashion-MNIST (the full one: CIFAR-10)
    assert len(main) == 8 * 2 * 3 and main <= {config_hash(c) for c in chapter.experiments(full)}
    assert len(extra) == 3 and all(c.algorithm_params["gamma"] == 1.0 for c in grid["annealing"] if config_hash(c) in extra)
    assert all(c.data.num_clients == 100 and c.participation == 0.1 and c.rounds == 100 and c.data.pool_size is None
               for c in grid["main"])


def test_the_five_seed_reduced_yaml_adds_seeds_that_the_ledger_reads():
    from dataclasses import replace
    from pathlib import Path

    import yaml

    from fedkd_core.results import config_hash

    path = Path(__file__).resolve().parents[1] / "notebooks" / "params" / "reduced" / "fedckd_5seeds.yaml"
    five = chapter.Params(**yaml.safe_load(path.read_text()))
    assert five == replace(chapter.REDUCED_PROFILE, seeds=5)
    three = {config_hash(c) for c in chapter.experiments(chapter.REDUCED_PROFILE)}
    added = [c for c in chapter.experiments(five) if config_hash(c) not in three]
    assert {c.seed for c in added} == {3, 4} and len(added) == 2 * (8 * 2 + 1)
    read = {config_hash(c) for grid in chapter.grids(replace(chapter.REDUCED_PROFILE, seeds=chapter.READ_SEEDS)).values()
            for c in grid}
    assert {config_hash(c) for c in added} <= read


# --- the chapter's tables from hand-made summary rows ---------------------------------------------

def summary_rows(**columns) -> pd.DataFrame:
    """:func:`chapter.summary`-like rows: ``columns`` as lists, the rest at one cell's values."""
    count = len(next(iter(columns.values())))
    base = {"profile": "reduced", "dataset": "fashion_mnist", "setting": "practical", "clients": 20, "participation": 1.0,
            "alpha": 0.1, "model": "pfedsd_cnn_mnist", "algorithm": "fedckd", "gamma": None, "seed": 0, "rounds": 15}
    return pd.DataFrame({**{key: [value] * count for key, value in base.items()}, **columns})


def test_fairness_table_keeps_each_profiles_largest_practical_scale_beside_the_papers():
    main = summary_rows(profile=["reduced", "reduced", "reduced", "paper", "paper"],
                        setting=["practical", "practical", "pathological", "practical", "practical"],
                        clients=[20, 20, 20, 20, 100], seed=[0, 1, 0, 0, 0],
                        alma=[0.9, 0.8, 0.1, 0.1, 0.7], client_std=[0.1, 0.2, 0.5, 0.5, 0.04])
    table = chapter.fairness_table(main)
    assert table.to_dict("records") == [
        {"dataset": "fashion_mnist", "clients": 20, "algorithm": "FedCKD", "ours": "85.00 ± 15.00", "seeds": 2,
         "paper (n = 100)": "96.03 ± 3.98", "profile": "reduced"},
        {"dataset": "fashion_mnist", "clients": 100, "algorithm": "FedCKD", "ours": "70.00 ± 4.00", "seeds": 1,
         "paper (n = 100)": "96.03 ± 3.98", "profile": "paper"}]


def test_annealing_gain_is_fedckd_with_annealing_minus_without_per_profile_and_dataset():
    runs = summary_rows(gamma=[0.99, 0.99, 1.0, 1.0], seed=[0, 1, 0, 1], alma=[0.93, 0.95, 0.90, 0.92])
    table = chapter.annealing_table(runs)
    assert table.set_index("annealing")["mean"].to_dict() == pytest.approx({True: 94.0, False: 91.0})
    gains = chapter.annealing_gains(table)
    assert gains[["profile", "dataset"]].values.tolist() == [["reduced", "fashion_mnist"]]
    assert gains.gain.tolist() == pytest.approx([3.0])


def test_annealing_gain_per_seed_pairs_each_seed_with_itself_and_skips_an_unpaired_one():
    runs = summary_rows(gamma=[0.99, 0.99, 0.99, 1.0, 1.0], seed=[0, 1, 2, 1, 0], alma=[0.93, 0.95, 0.97, 0.90, 0.92])
    gains = chapter.annealing_seed_gains(runs)
    assert gains.seed.tolist() == [0, 1]  # seed 2 has no γ = 1 run
    assert gains.gain.tolist() == pytest.approx([1.0, 5.0])  # 93 − 92, 95 − 90
    assert chapter.annealing_seed_gains(runs[runs.gamma < 1]).empty


def test_sensitivity_table_puts_each_run_in_the_one_column_it_varies():
    params = chapter.Params(scenarios="20:1.0:15", alpha=0.1)
    runs = summary_rows(alpha=[0.1, 1.0, 0.1, 0.1], participation=[1.0, 1.0, 0.5, 1.0],
                        model=["pfedsd_cnn_mnist", "pfedsd_cnn_mnist", "pfedsd_cnn_mnist", "resnet8"],
                        alma=[0.50, 0.60, 0.70, 0.80])
    table = chapter.sensitivity_table(runs, params)
    assert table.loc["FedCKD"].to_dict() == {("alpha", 0.1): "50.00 ± 0.00", ("alpha", 1.0): "60.00 ± 0.00",
                                             ("participation", 0.5): "70.00 ± 0.00",
                                             ("participation", 1.0): "50.00 ± 0.00", ("model", "resnet8"): "80.00 ± 0.00"}


def test_fig5_counts_the_clients_of_seed_0_at_each_profiles_smallest_scale():
    accuracies = {("fedckd", 0, 3): [0.9, 0.5, 0.7], ("pfedsd", 0, 3): [0.8, 0.6, 0.7],
                  ("fedckd", 1, 3): [0.9, 0.9, 0.9], ("pfedsd", 1, 3): [0.1, 0.1, 0.1],
                  ("fedckd", 0, 5): [0.9] * 5, ("pfedsd", 0, 5): [0.1] * 5}
    main = summary_rows(algorithm=[a for a, _, _ in accuracies], seed=[s for _, s, _ in accuracies],
                        clients=[n for _, _, n in accuracies], gamma=[0.99 if a == "fedckd" else None for a, _, _ in accuracies],
                        client_accuracies=list(accuracies.values()))
    counts = chapter.per_client_counts(chapter.fig5_differences(main))
    assert counts.drop(columns=["profile", "dataset", "setting"]).to_dict("records") == [
        {"clients": 3, "FedCKD better": 1, "equal": 1, "pFedSD better": 1, "mean difference": 0.0}]


def test_cross_entropy_at_uniform_logits_has_the_gradient_and_curvature_worked_by_hand():
    """softmax − onehot = 1/C − 1 at the label; Hessian diag(p) − pp^T: eigenvalues 1/C and 0."""
    ce = chapter.logit_sharpness(lambda z: F.cross_entropy(z, torch.tensor([0])), classes=4)
    assert ce == pytest.approx({"largest |∂loss/∂z|": 0.75, "largest curvature": 0.25})


def test_the_literal_kl_direction_is_steeper_than_hintons_which_stays_within_lambda_tau():
    table = chapter.kl_sharpness(lam=0.5, temperature=3.0)
    hinton, literal = table.loc["λ·τ²·KL(teacher ‖ student)"], table.loc["λ·τ²·KL(student ‖ teacher)"]
    assert hinton["largest |∂loss/∂z|"] <= 0.5 * 3.0 + 1e-6
    assert literal["largest |∂loss/∂z|"] > 2 * hinton["largest |∂loss/∂z|"]
    assert literal["largest curvature"] > 10 * hinton["largest curvature"]


def test_the_kl_sharpness_table_names_its_rows_loss_not_index():
    text = tables.html(chapter.kl_sharpness(lam=0.5, temperature=3.0), digits=3)
    assert '<th><span class="fedkd-word">loss</span></th>' in text and ">index<" not in text


def test_a_profiles_scale_is_read_from_its_params():
    reduced = chapter.Params(profile="reduced", scenarios="20:1.0:15", pool_size=4000, local_epochs=5, seeds=3)
    assert chapter.scale_text(reduced) == ("reduced: fashion_mnist, n = 20, r = 1, T = 15, 4,000 training images "
                                           "(200 per client at n = 20), E = 5")
    paper = chapter.Params(profile="paper", scenarios="20:1.0:50,100:0.1:100", pool_size=0, seeds=1)
    assert chapter.scale_text(paper) == ("paper: fashion_mnist, n = 20, r = 1, T = 50; n = 100, r = 0.1, T = 100, "
                                         "the whole training split, E = 1")
    assert chapter.images_text(replace(reduced, scenarios="20:1.0:15,40:1.0:15")) == (
        "4,000 training images (200 per client at n = 20, 100 per client at n = 40)")


def test_the_hyperparameter_table_gives_the_records_profile_beside_this_pages():
    quick = chapter.Params(profile="quick", local_epochs=2)
    table = chapter.hyperparameter_table(quick, chapter.REDUCED_PROFILE).set_index("parameter")
    records, page = "reduced profile (the committed records; verdicts)", "quick profile (this page)"
    assert list(table.columns) == ["paper", records, page, "source"]
    assert table.loc["local epochs E", [records, page]].tolist() == [chapter.REDUCED_PROFILE.local_epochs, 2]
    assert table.loc["gamma", [records, page]].tolist() == [chapter.REDUCED_PROFILE.gamma, quick.gamma]
    assert {f.name for f in fields(algorithm_config("fedckd", {}))} <= set(table.index)
    paper_verdicts = chapter.hyperparameter_table(chapter.REDUCED_PROFILE, chapter.PAPER_FMNIST100)
    assert [c for c in paper_verdicts.columns if "profile" in c] == [
        "reduced profile (the committed records; this page)", "paper profile (verdicts)"]
    early = chapter.hyperparameter_table(chapter.REDUCED_PROFILE, chapter.REDUCED_PROFILE, moved=2)
    assert [c for c in early.columns if "profile" in c] == [
        "reduced profile (the committed records; other verdicts; this page)", "paper profile (verdicts of 2 claims)"]


def test_forgetting_is_told_with_the_client_rounds_on_both_sides_and_as_a_demonstration():
    trace = pd.DataFrame({"round": [1, 1, 1, 2, 2, 2], "client": [0, 1, 2, 0, 1, 2],
                          "before": [0.9, 0.8, 0.5, 0.9, 0.6, 0.7], "after": [0.1, 0.9, 0.5, 0.95, 0.7, 0.6]})
    # gaps (after - before) in points: -80, +10, 0, +5, +10, -10: mean -65/6, median +2.5
    text = chapter.forgetting_text(trace, "quick")
    assert f"{-65 / 6:+.1f} points on average, median +2.5" in text
    assert "lower in 2, higher in 3 and the same in 1 of them" in text and "untrained" not in text
    assert "**quick** profile (2 rounds, one seed" in text and "not evidence" in text
    untrained = chapter.forgetting_text(trace.assign(after=0.15), "quick")
    assert "at 15.0% on average" in untrained and "chance 10%" in untrained and "not forgetting" in untrained
    by_round = chapter.forgetting_by_round(trace)
    assert by_round["global lower"].tolist() == [1, 1] and by_round["global higher"].tolist() == [1, 2]
    assert by_round["own model (%)"].tolist() == pytest.approx([220 / 3, 220 / 3])


def test_a_forgetting_trace_is_stored_once_and_read_back_with_where_it_ran(tmp_path, monkeypatch):
    from fedkd_core.experiment import ExperimentConfig
    from fedkd_core.federation import DataConfig
    from fedkd_core.training import TrainConfig

    config = ExperimentConfig(algorithm="fedckd", data=DataConfig("mnist", num_clients=3, samples_per_client=20,
                                                                    local_test_size=20),
                              model="knfu_m1", rounds=1, train=TrainConfig(batch_size=10, mixed_precision=False))
    computed = chapter.stored_forgetting_trace(config, rounds=1, root=tmp_path)
    assert not computed.read_back and computed.path.exists() and computed.path.parent == tmp_path / "traces" / "forgetting"
    assert computed.frame["client"].tolist() == [0, 1, 2] and computed.environment["precision"] == "fp32"
    told = chapter.trace_provenance(computed)
    assert "by this build" in told and "read back" not in told and "/" not in told  # no path in a page's text
    assert not re.search(r"family \d+ model \d+", told)  # the machine's plain name, as every page but Performance

    def must_not_run(*args):
        raise AssertionError("a stored trace was computed again")

    monkeypatch.setattr("fedkd_core.chapters.fedckd.analysis.forgetting_trace", must_not_run)
    read = chapter.stored_forgetting_trace(config, rounds=1, root=tmp_path)
    assert read.read_back and read.frame.equals(computed.frame) and read.measured == computed.measured
    assert "read back by this build" in chapter.trace_provenance(read)
    text = chapter.forgetting_text(read.frame, "quick", provenance=chapter.trace_provenance(read))
    assert "not a record the verdicts read; computed on " in text
    with pytest.raises(AssertionError, match="computed again"):  # another number of rounds is another trace
        chapter.stored_forgetting_trace(config, rounds=2, root=tmp_path)


def test_the_verdicts_rest_on_the_paper_scale_column_only_once_all_its_runs_are_committed(tmp_path, monkeypatch):
    from fedkd_core.chapters.fedckd import claims

    runs = len(chapter.experiments(chapter.PAPER_FMNIST100))
    empty = chapter.verdict_basis(tmp_path)
    assert empty.params == chapter.REDUCED_PROFILE and empty.records == [] and empty.enforce_gate
    text = chapter.verdict_basis_text(tmp_path)
    assert f"**0 of the {runs} runs**" in text
    assert "the verdicts move to it once all of them are" in text and "rest on the **reduced** profile's 0 committed records" in text
    from types import SimpleNamespace

    from fedkd_core.results import config_hash

    records = [SimpleNamespace(key=config_hash(c)) for c in chapter.experiments(chapter.PAPER_FMNIST100)]
    monkeypatch.setattr(claims, "settled_claims", lambda records, root=None: ())  # per claim: the test below
    monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: records[:-1])
    assert chapter.verdict_basis(tmp_path).params == chapter.REDUCED_PROFILE  # one run short: still reduced
    monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: records[:-1] + records[:1])
    assert chapter.verdict_basis(tmp_path).params == chapter.REDUCED_PROFILE  # one run twice is still one short
    monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: records)
    paper = chapter.verdict_basis(tmp_path)
    assert paper.params == chapter.PAPER_FMNIST100 and len(paper.records) == runs and not paper.enforce_gate
    assert f"they rest on the rerun's {runs} committed records" in chapter.verdict_basis_text(tmp_path)




def test_a_claim_moves_to_the_paper_column_once_every_run_it_compares_is_finished(tmp_path, monkeypatch):
    """With every paper-scale run finished but pFedMe's, the claims that do not compare pFedMe
    (FedCKD > pFedSD, the annealing pair) are judged on the column already, the two that do stay
    on the reduced profile; one γ = 1 run short and the annealing claim waits too; a finished
    pFedSD run whose FedCKD partner is still to come keeps FedCKD > pFedSD back."""
    from types import SimpleNamespace

    from fedkd_core.chapters.fedckd import claims
    from fedkd_core.results import config_hash

    planned = chapter.experiments(chapter.PAPER_FMNIST100)
    score = {"fedckd": 90.0, claims.CONSTANT: 89.0}
    runs = [SimpleNamespace(key=config_hash(c), planned=c) for c in planned]
    monkeypatch.setattr(claims, "observations", lambda records: pd.DataFrame(
        [{**(row := claims._planned_stand_in(r.planned)), "final": score.get(row["algorithm"], 80.0)} for r in records]))

    def moved(records):
        monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: records)
        return set(chapter.verdict_basis(tmp_path).moved)

    no_pfedme = [r for r in runs if r.planned.algorithm != "pfedme"]
    assert moved(no_pfedme) == {"FedCKD > pFedSD", claims.ANNEALING_CLAIM}
    text = chapter.verdict_basis_text(tmp_path)
    assert "*FedCKD > pFedSD* and *annealing helps" in text and "judged on it already" in text
    assert f"**{len(no_pfedme)} of the {len(planned)} runs**" in text
    # a run that diverged is finished: pFedSD's diverged seed does not hold FedCKD > pFedSD back
    import fedkd_core.results as results

    pfedsd = next(r for r in no_pfedme if r.planned.algorithm == "pfedsd")
    monkeypatch.setattr(results, "stored_divergences", lambda configs, root=None: [SimpleNamespace(key=pfedsd.key)])
    assert moved([r for r in no_pfedme if r is not pfedsd]) == {"FedCKD > pFedSD", claims.ANNEALING_CLAIM}
    monkeypatch.setattr(results, "stored_divergences", lambda configs, root=None: [])
    assert moved([r for r in no_pfedme if r is not pfedsd]) == {claims.ANNEALING_CLAIM}  # not diverged: to come

    def is_constant_seed_2(run):
        return run.planned.algorithm == "fedckd" and run.planned.resolved()["algorithm_params"].get("gamma") == 1.0 \
            and run.planned.seed == 2
    assert sum(map(is_constant_seed_2, runs)) == 1
    assert moved([r for r in no_pfedme if not is_constant_seed_2(r)]) == {"FedCKD > pFedSD"}

    def is_fedckd_practical_seed_1(run):
        config = run.planned.resolved()
        return (run.planned.algorithm == "fedckd" and config["data"]["partition"] == "dirichlet"
                and run.planned.seed == 1 and config["algorithm_params"].get("gamma") != 1.0)
    assert moved([r for r in no_pfedme if not is_fedckd_practical_seed_1(r)]) == set()  # both claims need it
    assert moved([]) == set()
    monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: runs)
    everything = chapter.verdict_basis(tmp_path)
    assert everything.params == chapter.PAPER_FMNIST100 and everything.moved == ()  # the whole column: all moved


def test_a_moved_claims_row_is_judged_on_the_paper_column_and_keeps_its_place(monkeypatch):
    """The ledger's row of a claim judged on the column already comes from the column's records;
    the others from the reduced profile, in the reduced rows' order."""
    from dataclasses import replace

    from fedkd_core.chapters.fedckd import claims

    order = ["FedCKD > pFedSD", "FedCKD best of the methods run", claims.ANNEALING_CLAIM]
    basis = replace(chapter.VerdictBasis(chapter.REDUCED_PROFILE, ["reduced run"], "reduced scale", True),
                    moved=(claims.ANNEALING_CLAIM,))
    monkeypatch.setattr(claims, "verdict_basis", lambda root=None: basis)
    monkeypatch.setattr(claims, "paper_scale_records", lambda root=None: ["paper run", "pfedme run"])
    judged_on = {}

    def claim_rows(params, records, scale, enforce_gate, root=None):
        judged_on[params.profile] = (records, enforce_gate)
        return pd.DataFrame({"claim": order, "verdict": [params.profile] * 3, "scale": [scale] * 3})

    monkeypatch.setattr(claims, "claim_rows", claim_rows)
    rows = claims.ledger_rows()
    assert rows.claim.tolist() == order and rows.verdict.tolist() == ["reduced", "reduced", "paper"]
    assert judged_on == {"paper": (["paper run", "pfedme run"], False), "reduced": (["reduced run"], True)}


def test_each_claim_is_judged_on_the_runs_it_compares_only(monkeypatch):
    """FedCKD > pFedSD reads FedCKD's and pFedSD's runs in the seeds that have both, the annealing
    claim FedCKD's with and without annealing; the other runs of the profile are not its evidence
    (nor pair machines for it), and its row is judged on those runs alone."""
    from types import SimpleNamespace

    from fedkd_core.chapters.fedckd import claims

    def run(algorithm, seed, final):
        return SimpleNamespace(algorithm=algorithm, seed=seed, final=final)

    runs = [run(m, seed, 90.0 - i) for seed in (0, 1, 2) for i, m in enumerate(("fedckd", "pfedsd", "fedavg"))]
    runs += [run(claims.CONSTANT, seed, 89.5) for seed in (0, 1)] + [run("fedckd", 3, 90.0)]  # seed 3: FedCKD alone
    monkeypatch.setattr(claims, "observations", lambda records: pd.DataFrame(
        [{"dataset": "fashion_mnist", "setting": "practical", "clients": 100, "seed": r.seed, "algorithm": r.algorithm,
          "final": r.final, "best": r.final} for r in records]))
    names = {id(r): (r.algorithm, r.seed) for r in runs}
    reads = claims.records_read(runs)
    read = {claim: sorted(names[id(r)] for r in reads[claim]) for claim in ("FedCKD > pFedSD", claims.ANNEALING_CLAIM)}
    assert read["FedCKD > pFedSD"] == [("fedckd", 0), ("fedckd", 1), ("fedckd", 2), ("pfedsd", 0), ("pfedsd", 1), ("pfedsd", 2)]
    assert read[claims.ANNEALING_CLAIM] == [("fedckd", 0), ("fedckd", 1), (claims.CONSTANT, 0), (claims.CONSTANT, 1)]
    assert set(reads) == {"FedCKD > pFedSD", "FedCKD best of the methods run", claims.ANNEALING_CLAIM,
                          "every personalised method beats FedAvg and FedProx"}
    assert len(reads["FedCKD best of the methods run"]) == 9  # FedCKD, pFedSD and FedAvg in seeds 0-2

    judged_with = []

    def judged(records, scale, enforce_gate, failures=None):
        judged_with.append(len(records))
        return pd.DataFrame({"claim": ["FedCKD > pFedSD", claims.ANNEALING_CLAIM], "verdict": [len(records)] * 2,
                             "note": ["", ""]})

    monkeypatch.setattr(claims, "_judged", judged)
    monkeypatch.setattr(claims, "diverged_seeds", lambda records, divergences: {})
    rows = claims.claim_rows(chapter.PAPER_FMNIST100, runs, "paper", False, root=None)
    assert rows.verdict.tolist() == [6, 4] and judged_with == [len(runs), 6, 4]


def test_the_paper_column_shows_only_its_own_main_grid_runs_and_its_divergences():
    """Tables I-II show the paper-scale column as far as it has run: its committed records and its
    diverged runs, of its main grid only (not the reduced profile's, not Table IV's γ = 1 run)."""
    from fedkd_core.chapters import fedckd
    from fedkd_core.results import config_hash

    committed = Path(__file__).resolve().parents[1] / "results"
    records, diverged = fedckd.paper_column(committed)
    main = {config_hash(config) for config in fedckd.grids(fedckd.PAPER_FMNIST100)["main"]}
    assert records and {record.key for record in records} <= main
    assert all(record.profile == "paper" and record.config["data"]["num_clients"] == 100 for record in records)
    assert {d.key for d in diverged} <= main and not {d.key for d in diverged} & {r.key for r in records}


def test_a_cell_whose_only_run_diverged_says_so_and_one_with_a_record_names_its_diverged_seeds():
    from types import SimpleNamespace

    from fedkd_core.chapters import fedckd

    def diverged(algorithm, partition, seed, round_index, clients=100):
        config = {"data": {"dataset": "fashion_mnist", "partition": partition, "num_clients": clients}, "seed": seed}
        return SimpleNamespace(config=config, algorithm=algorithm, round=round_index, profile="paper")

    def record(algorithm, alma, profile="paper", seed=0):
        return {"dataset": "fashion_mnist", "setting": "pathological", "clients": 100, "algorithm": algorithm,
                "alma": alma, "profile": profile, "rounds": 100, "precision": "fp32", "seed": seed}

    ours = pd.DataFrame([record("fedper", 0.97), record("fedfomo", 0.96), record("fedfomo", 0.98, seed=2),
                         record("pfedme", 0.90, profile="reduced")])
    runs = [diverged("lg_fedavg", "pathological", 0, 53), diverged("lg_fedavg", "pathological", 2, 61),
            diverged("fedper", "pathological", 1, 9), diverged("fedper", "pathological", 2, 12),
            diverged("fedfomo", "pathological", 1, 30), diverged("pfedme", "dirichlet", 0, 4),
            diverged("pfedme", "pathological", 1, 7)]
    table = fedckd.compare_accuracy(ours, "pathological", runs).set_index(["dataset", "clients", "algorithm", "profile"]).sort_index()
    assert table.loc[("fashion_mnist", 100, "LG-FedAvg", "paper"), "ours"] == "2 of 2 diverged (seed 0, round 53; seed 2, round 61)"
    # one seed finished, two diverged: not to be read as a cell short of runs
    assert table.loc[("fashion_mnist", 100, "FedPer", "paper"), "ours"] == \
        "97.00 (1 seed; 2 of 3 diverged: seed 1, round 9; seed 2, round 12)"
    assert table.loc[("fashion_mnist", 100, "FedFomo", "paper"), "ours"].endswith("(1 of 3 diverged: seed 1, round 30)")
    assert table.loc[("fashion_mnist", 100, "FedFomo", "paper"), "seeds"] == 2
    # the reduced profile ran pFedMe; the paper profile's only run diverged and gets a row of its own
    assert table.loc[("fashion_mnist", 100, "pFedMe", "reduced"), "ours"] == "90.00 (1 seed)"
    assert table.loc[("fashion_mnist", 100, "pFedMe", "paper"), "ours"] == "1 of 1 diverged (seed 1, round 7)"
    assert table.loc[("fashion_mnist", 20, "LG-FedAvg"), "ours"].tolist() == ["not run"]
    assert table.loc[("fashion_mnist", 100, "FedAvg"), "ours"].tolist() == ["not run"]  # diverged in no setting
    from fedkd_core import tables

    shown = tables.paper_layout(table.reset_index(), ["algorithm"], ["dataset", "clients"], method="algorithm")
    assert "2 of 2 diverged (seed 0, round 53; seed 2, round 61)" in shown and "2 of 3 diverged: seed 1, round 9" in shown
    reduced_block = shown[shown.index("profile <b>reduced</b>"):]
    reduced_block = reduced_block[:reduced_block.index("</table>")]
    assert "90.00 (1 seed)" in reduced_block and "diverged" not in reduced_block  # the paper profile's stays there
    # two profiles whose runs of one cell all diverged: each keeps its own; a run outside the paper's table is ignored
    both = [diverged("fedavg", "pathological", 1, 5), SimpleNamespace(**{**vars(diverged("fedavg", "pathological", 2, 6)),
                                                                          "profile": "reduced"}),
            SimpleNamespace(**{**vars(diverged("fedavg", "pathological", 0, 3)),
                               "config": {"data": {"dataset": "mnist", "partition": "pathological", "num_clients": 100},
                                          "seed": 0}})]
    table = fedckd.compare_accuracy(ours, "pathological", both).set_index(["dataset", "clients", "algorithm", "profile"])
    assert table.loc[("fashion_mnist", 100, "FedAvg", "paper"), "ours"] == "1 of 1 diverged (seed 1, round 5)"
    assert table.loc[("fashion_mnist", 100, "FedAvg", "reduced"), "ours"] == "1 of 1 diverged (seed 2, round 6)"
    # a partial cell's seed count and its divergences read as one bracket
    from fedkd_core.chapters.fedckd.tables import with_divergences

    assert with_divergences("73.36 ± 4.80 (2 seeds)", 2, "seed 0, round 3") == \
        "73.36 ± 4.80 (2 seeds; 1 of 3 diverged: seed 0, round 3)"


def test_the_divergence_rate_of_each_method_and_cell_counts_its_diverged_runs_among_all_its_runs():
    from types import SimpleNamespace

    from fedkd_core.chapters.fedckd.tables import divergence_rates, divergence_rates_text

    def run(algorithm, partition, seed, profile="paper"):
        config = {"algorithm": algorithm, "seed": seed,
                  "data": {"dataset": "fashion_mnist", "partition": partition, "num_clients": 100}}
        return SimpleNamespace(config=config, profile=profile)

    records = [run(m, p, s) for m in ("fedavg", "pfedsd", "lg_fedavg") for p in ("dirichlet", "pathological")
               for s in (0, 1, 2) if not (p == "pathological" and (m, s) in {("pfedsd", 1), ("pfedsd", 2),
                                                                            ("lg_fedavg", 0)})]
    diverged = [run("pfedsd", "pathological", 2), run("pfedsd", "pathological", 1), run("lg_fedavg", "pathological", 0)]
    rates = divergence_rates(records, diverged)
    pathological = rates[rates.setting == "pathological"].set_index("algorithm")
    assert pathological.loc["pFedSD", "rate"] == "2 of 3 diverged" and pathological.loc["pFedSD", "diverged seeds"] == "1, 2"
    assert pathological.loc["LG-FedAvg", "rate"] == "1 of 3 diverged" and pathological.loc["FedAvg", "rate"] == "0 of 3 diverged"
    assert list(pathological.index) == ["FedAvg", "LG-FedAvg", "pFedSD"]  # the chapter's method order
    assert set(rates[rates.setting == "practical"].diverged) == {0}
    assert divergence_rates_text(rates) == (
        "Divergence rate per method and cell (diverged of all runs): profile paper, fashion_mnist n = 100, "
        "pathological: LG-FedAvg 1 of 3, pFedSD 2 of 3; the other method 0 of 3.")
    assert divergence_rates_text(divergence_rates(records, [])) == ""


def test_a_diverged_run_takes_its_seed_out_of_exactly_the_claims_that_name_its_method(monkeypatch):
    from types import SimpleNamespace

    from fedkd_core.chapters.fedckd import claims

    methods = ("fedavg", "fedprox", "fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd")
    rows = [{"dataset": "fashion_mnist", "setting": "pathological", "clients": 100, "seed": seed, "algorithm": m,
             "final": 0.9 if m not in ("fedavg", "fedprox") else 0.7}
            for seed in (0, 1) for m in methods if not (seed == 1 and m == "pfedsd")]
    monkeypatch.setattr(claims, "observations", lambda records: pd.DataFrame(rows))

    def diverged(algorithm, seed, round_):
        config = {"seed": seed, "algorithm": algorithm, "algorithm_params": {}, "participation": 0.1,
                  "model": "cnn", "data": {"dataset": "fashion_mnist", "partition": "pathological",
                                           "num_clients": 100, "alpha": 0.1}}
        return SimpleNamespace(config=config, round=round_, algorithm=algorithm)

    left_out = claims.diverged_seeds([], [diverged("pfedsd", 1, 18)])
    # pFedSD is named by three claims; the annealing pair (FedCKD against γ = 1) does not name it
    assert set(left_out) == {"FedCKD > pFedSD", "FedCKD best of the methods run",
                             "every personalised method beats FedAvg and FedProx"}
    assert left_out["FedCKD > pFedSD"] == "pathological seed 1 (pFedSD diverged in round 18)"
    assert claims.diverged_seeds([], []) == {}
    # two runs diverged in one seed: each is named by every claim that needed it, even one that takes
    # the worst of several methods (where one stand-in's value would hide the other's)
    rows[:] = [r for r in rows if not (r["seed"] == 1 and r["algorithm"] == "lg_fedavg")]
    both = claims.diverged_seeds([], [diverged("pfedsd", 1, 18), diverged("lg_fedavg", 1, None)])
    personalised = both["every personalised method beats FedAvg and FedProx"]
    assert "pFedSD diverged in round 18" in personalised and "LG-FedAvg diverged in round ?" in personalised
    assert "LG-FedAvg" not in both["FedCKD > pFedSD"]
    # seed 2 has no run yet but pFedSD's, which diverged: nothing is lost so far; once the grid's other
    # seed-2 runs finish, the claims that name pFedSD lose seed 2 too
    from fedkd_core.results import config_hash

    planned = [c for c in chapter.experiments(chapter.PAPER_FMNIST100) if c.seed == 2]
    pfedsd_2 = next(c for c in planned if c.algorithm == "pfedsd" and c.resolved()["data"]["partition"] == "pathological")
    run_2 = SimpleNamespace(**vars(diverged("pfedsd", 2, 12)), key=config_hash(pfedsd_2))
    assert "seed 2" not in claims.diverged_seeds([], [run_2]).get("FedCKD > pFedSD", "")
    projected = claims.diverged_seeds([], [run_2], planned)
    assert projected["FedCKD > pFedSD"] == "pathological seed 2 (pFedSD diverged in round 12)"
    assert "FedCKD > pFedSD" in projected and set(projected) <= set(left_out)  # never a claim without pFedSD
    # in words: while seed 2's other runs are to come, what is lost so far and what will be; once they
    # are in (here: every planned run but the diverged one stands as finished), only what is lost
    named = SimpleNamespace(**vars(run_2), error="non-finite loss; x", environment={"device_name": "A CPU"})
    under_way = claims.divergences_text([], [named], planned)
    assert "pFedSD, pathological, seed 2: non-finite loss, in round 12" in under_way
    assert "so far" in under_way and "Once every run of the column has finished" in under_way
    done = [SimpleNamespace(key=config_hash(c)) for c in planned if config_hash(c) != named.key]
    monkeypatch.setattr(claims, "diverged_seeds", lambda records, divergences, planned=(): projected)
    complete = claims.divergences_text(done, [named], planned)
    assert "so far" not in complete and "Once every run" not in complete
    assert "(of the paper's 3 seeds per setting): *" in complete and complete.endswith(".")
    assert "*FedCKD > pFedSD*: pathological seed 2 (pFedSD diverged in round 12)" in complete
    assert claims.divergences_text([], [], planned) == ""


def test_divergences_are_tallied_by_kind_of_device_with_fishers_exact_test():
    from types import SimpleNamespace

    def run(algorithm, device, partition="pathological"):
        return SimpleNamespace(config={"algorithm": algorithm, "data": {"partition": partition}},
                               environment={"device": device})

    records = [run("pfedsd", "cpu"), run("pfedsd", "cpu", "dirichlet"), run("fedckd", "cuda")]
    diverged = [run("pfedsd", "cuda"), run("pfedsd", "cuda"), run("lg_fedavg", "cpu")]
    checks = [(diverged[0], run("pfedsd", "cpu")), (diverged[1], run("pfedsd", "cpu"))]
    (row,) = chapter.divergence_tally(records, diverged, checks)  # only the checked method and partition
    assert (row["algorithm"], row["partition"]) == ("pfedsd", "pathological")
    assert row["counts"] == {"GPU": (2, 2), "CPU": (0, 3)}
    assert abs(row["p"] - 0.1) < 1e-12  # 1 / C(5, 2): both divergences on the two GPU runs by chance
    text = chapter.divergence_tally_text(records, diverged, checks)
    assert "2 of 2 runs diverged on a GPU, 0 of 3 runs diverged on a CPU" in text and "p = 0.10" in text
    # the GPU runs predate host-drawn dropout masks: the text says the pairs also differ in their draws
    assert "arithmetic" not in text and "differs in its random draws" in text
    from fedkd_core.randomness import MASK_GENERATOR

    same_masks = [(SimpleNamespace(**{**vars(d), "environment": {"device": "cuda", "mask_generator": MASK_GENERATOR}}), r)
                  for d, r in checks]
    assert "random draws" not in chapter.divergence_tally_text(records, diverged, same_masks)
    assert chapter.divergence_tally_text(records, diverged, []) == ""


def test_a_diverged_run_finished_on_another_machine_is_shown_beside_it_and_read_by_no_verdict(tmp_path):
    import shutil
    from types import SimpleNamespace

    from fedkd_core.results import stored_records

    key = "e4d93f14b78c1811"  # pFedSD, pathological, seed 1: diverged on an H200, finished on a Zen 5 CPU
    committed = Path(__file__).resolve().parents[1] / "results" / "machine_checks" / "paper" / "pfedsd" / f"{key}.json"
    target = tmp_path / "machine_checks" / "paper" / "pfedsd"
    target.mkdir(parents=True)
    shutil.copy(committed, target)
    diverged = SimpleNamespace(algorithm="pfedsd", key=key, round=18, environment={"device_name": "GPU X", "device": "cuda"},
                               config={"seed": 1, "data": {"partition": "pathological"}})
    checks = chapter.machine_checks([diverged], root=tmp_path)
    assert len(checks) == 1 and checks[0][1].key == key
    text = chapter.machine_check_text(checks)
    assert "pFedSD, pathological, seed 1: diverged on GPU X in round 18, finished on AMD EPYC Zen 5" in text
    assert f"at {checks[0][1].final['alma'] * 100:.2f}% after 100 rounds" in text
    # the H200 run drew its masks from the GPU's generator (it predates randomness.MASK_GENERATOR)
    assert "not one computation under two machines' rounding" in text and "arithmetic" not in text
    assert "(SGD lr 0.01, momentum 0.9, no gradient clipping)" not in text  # this stand-in has no train config
    assert chapter.machine_checks([replace_key(diverged, "0" * 16)], root=tmp_path) == []
    assert chapter.machine_check_text([]) == ""
    configs = chapter.experiments(chapter.PAPER_FMNIST100)
    assert key not in {record.key for record in stored_records(configs, root=tmp_path)}  # no verdict reads it


def replace_key(run, key):
    from types import SimpleNamespace

    return SimpleNamespace(**{**vars(run), "key": key})


def test_the_chapters_tables_name_methods_as_the_paper_does_never_by_their_keys():
    """Issue 61: the best-round table showed `lg_fedavg`, `pfedsd`, ...; every FedCKD table a reader
    sees names a method as the paper writes it (grid.METHOD_NAMES)."""
    from fedkd_core.algorithms import ALGORITHMS
    from fedkd_core.chapters.fedckd.tables import best_round_table, fairness_table, sensitivity_table, summary

    records = chapter.reduced_profile_records(Path(__file__).resolve().parents[1] / "results")  # the committed ones
    frame = summary(records)
    assert len(frame)
    shown = [best_round_table(frame), fairness_table(frame)]
    sensitivity = frame.assign(participation=1.0, model=chapter.MODEL_FOR["fashion_mnist"])
    shown.append(sensitivity_table(sensitivity, replace(chapter.Params(), alpha=float(frame.alpha.iloc[0]))).reset_index())
    for table in shown:
        cells = {str(value) for column in table.columns for value in table[column]}
        assert not cells & set(ALGORITHMS), (table.columns.tolist(), sorted(cells & set(ALGORITHMS)))
        assert {"LG-FedAvg", "pFedSD"} & cells or "FedCKD" in cells
    assert best_round_table(frame).method.tolist()[:2] == ["FedAvg", "FedProx"]


def test_pfedme_clips_its_inner_gradient_under_the_train_configs_clipping(monkeypatch):
    """pFedMe trains through its own loop: TrainConfig.max_grad_norm clips θ's gradient there too,
    before each Moreau inner step (what every other method gets from training.train)."""
    from fedkd_core.algorithms import pfedme

    seen = []
    inner = pfedme.moreau_inner_step

    def recording(theta, *args):
        seen.append(float(torch.cat([p.grad.flatten() for p in theta]).norm()))
        return inner(theta, *args)

    monkeypatch.setattr(pfedme, "moreau_inner_step", recording)
    data = make_ctx(num_clients=2, pool=200).data
    for clip in (None, 0.05):
        ctx = Context(data=data, model_name="cnn5", train=TrainConfig(epochs=1, batch_size=64, lr=0.05, max_grad_norm=clip),
                      device=torch.device("cpu"), seed=0)
        algorithm = algorithm_class("pfedme")(algorithm_config("pfedme", {}), ctx)
        algorithm.begin_round(1)
        seen.clear()
        algorithm.client_update(0, algorithm.download(0))
        if clip is None:
            assert max(seen) > 0.05 * 1.5
        else:
            assert max(seen) <= clip * (1 + 1e-5)
