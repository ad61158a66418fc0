"""The FedGMKD chapter: its grid, the paper's tables as data, the tables and claims built from
records and the prototype identity on real features (its parameters through papermill: tests/test_notebooks.py)."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from fedkd_core.algorithms import algorithm_config
from fedkd_core.chapters import fedgmkd as chapter

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_profiles_load_and_run_the_reduced_method(profile):
    params = chapter.Params(**yaml.safe_load((ROOT / "notebooks" / "params" / profile / "fedgmkd.yaml").read_text()))
    expected = [] if profile == "quick" else ["model"]  # the paper profile trains ResNet-18
    assert chapter.method_differences(params) == expected


def test_reduced_grid_is_tables_1_6_and_3_once_per_seed_with_one_split_per_column():
    configs = chapter.experiments(chapter.REDUCED_PROFILE)
    cells = [chapter.cell_of(c) + (c.seed,) for c in configs]
    assert len(configs) == len(set(cells)) == (11 * 3 + 4 * 2) * 3
    table1 = [cell for cell in cells if cell[2] == 0.5]
    assert {cell[0] for cell in table1} == set(chapter.PAPER_METHODS) | {"fedgmkd_code", "hk_dat"}
    ablation = [cell for cell in cells if cell[2] != 0.5]
    assert {(cell[0], cell[1], cell[2]) for cell in ablation} == {
        (key, 10, beta) for key in chapter.TABLE3_METHODS for beta in (0.2, 5.0)}
    assert [c.seed for c in configs] == sorted(c.seed for c in configs)  # seed-major: a stopped sweep has whole seeds
    for count in (10, 20, 50):  # every method of a column sees the same clients (FedMD's transfer set included)
        column = {repr(c.data) for c in configs if c.data.num_clients == count and c.data.alpha == 0.5}
        assert len(column) == 1
        config = next(c for c in configs if c.data.num_clients == count)
        assert config.data.pool_size == 500 * count and config.data.transfer_size == 500
    assert all(c.train.optimizer == "adam" and c.train.lr == 1e-3 and c.train.batch_size == 64 for c in configs)


def test_every_row_is_recognised_from_its_config_and_from_its_stored_json():
    params = chapter.Params(methods=",".join(chapter.METHODS))
    for key in chapter.METHODS:
        config = chapter.run_config(params, key, 10, 0)
        assert chapter.cell_of(config)[0] == key
        stored = SimpleNamespace(config=json.loads(json.dumps(config.resolved())))  # as a record stores it
        assert chapter.cell_of(stored)[0] == key
    # a FedAvg scored with the global model, or a FedGMKD with another DAT b, is none of the rows;
    # another DAT a is one of the chapter's FedGMKD options, so the run is still FedGMKD's row
    assert chapter.method_key("fedavg", {"personal": "global"}) is None
    assert chapter.method_key("fedgmkd", dict(vars(algorithm_config("fedgmkd", {"dat_b": 0.5})))) is None
    assert chapter.method_key("fedgmkd", dict(vars(algorithm_config("fedgmkd", {"dat_a": 0.5})))) == "fedgmkd"
    option = chapter.run_config(replace(params, dat_a=0.4, kd_on="logits"), "only_ckf", 10, 0)
    assert option.algorithm_params["dat_a"] == 0.0 and chapter.cell_of(option)[0] == "only_ckf"  # the row's own a wins


def test_table5_and_ablation_grids():
    params = chapter.Params(methods="fedavg,fedgmkd", clients="4,6", ablation_alphas="0.2,5",
                            table5="0.06:0,0:0.06")
    cells = [chapter.cell_of(c) for c in chapter.experiments(params)]
    assert ("fedgmkd", 4, 0.5, 0.06, 0.0) in cells and ("fedgmkd", 4, 0.5, 0.0, 0.06) in cells
    # the ablation runs Table 3's four methods even where ``methods`` does not list them
    assert ("only_dat", 4, 0.2, 0.0, 0.0) in cells and ("fedavg", 4, 5.0, None, None) in cells
    assert not any(cell[0] in ("only_ckf", "only_dat") and cell[2] == 0.5 for cell in cells)
    assert not any(cell[1] == 6 and cell[2] != 0.5 for cell in cells)  # ablations run at the first count only
    assert chapter.parse_pairs("") == []


@pytest.mark.parametrize("overrides, message", [
    ({"methods": "fedavg,fedbe"}, "methods must be among"),
    ({"clients": "10,1"}, "clients must all be >= 2"),
    ({"table5": "0.06-0.02"}, "lambda:gamma"),
    ({"ablation_alphas": "0.2,-1"}, "must be > 0"),
    ({"methods": "fedmd", "transfer_size": 0}, "transfer_size must be >= 1"),
    ({"model": "resnet1000"}, "model must be one of"),
])
def test_bad_chapter_parameters_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        chapter.Params(**overrides)


def test_paper_times_are_ratios_to_fedavgs_on_the_same_dataset():
    """The paper's tables, cell by cell: tests/test_paper_tables.py."""
    # the notes' ratios of FedGMKD's time to FedAvg's: 2.54 (CIFAR-10), 1.86 (SVHN), 2.84 (CIFAR-100)
    times = chapter.paper_times().set_index(["dataset", "method"]).ratio
    assert [round(times[(d, "fedgmkd")], 2) for d in ("CIFAR-10", "SVHN", "CIFAR-100")] == [2.54, 1.86, 2.84]


def sign_counts(frame):
    """Per claim: (cells where it holds, cells) by the sign of each cell's effect (the paper prints no spread)."""
    from fedkd_core.verdicts import paper_verdicts

    verdicts = paper_verdicts(frame.assign(std=float("nan")), chapter.effects_of, list(chapter.EFFECT_CELL_KEYS), runs=1)
    return {claim: (v.holding, v.cells) for claim, v in verdicts.items()}


def test_claims_on_the_papers_own_tables():
    counts = sign_counts(chapter.paper_observations())
    assert counts["FedGMKD has the best local accuracy of Table 1's methods (those run)"] == (3, 3)
    assert counts["FedGMKD has the best global accuracy of Table 1's methods (those run)"] == (3, 3)
    assert counts["GMM prototypes beat mean prototypes (FedGMKD > HK + DAT)"] == (6, 6)
    # the paper's own Table 3: only DAT beats the full method in global accuracy at beta 0.2
    assert counts["CKF helps (FedGMKD > only DAT)"] == (3, 4)
    assert counts["DAT helps (FedGMKD > only CKF)"] == (4, 4)


def test_a_claim_is_only_tested_where_every_method_has_a_value():
    table = pd.DataFrame({"method": ["fedgmkd", "fedavg", "fedgmkd", "fedavg", "fedprox"], "table": "Table 1",
                          "alpha": 0.5, "clients": [10, 10, 20, 20, 20], "metric": ["local"] * 5,
                          "mean": [60.0, 55.0, 50.0, 52.0, 49.0]})
    counts = sign_counts(table)
    assert counts["FedGMKD has the best local accuracy of Table 1's methods (those run)"] == (0, 1)
    assert counts["FedGMKD beats FedAvg"] == (1, 2)


def record(method: str, history: list[dict], seed: int = 0, profile: str = "smoke",
           machine: str = "AMD EPYC (family 25 model 17, AVX512-BF16)") -> SimpleNamespace:
    config = chapter.run_config(chapter.Params(methods=method), method, 10, seed)
    return SimpleNamespace(config=config.resolved(), history=history, profile=profile,
                           environment={"precision": "fp32", "device_name": machine})


def rounds(local: list[float], global_: list[float], seconds: float = 10.0) -> list[dict]:
    return [{"round": r + 1, "alma": a, "global_acc": g, "seconds": seconds, "clients": 10,
             "bytes_up": 1e6 * 10, "bytes_down": 2e6 * 10} for r, (a, g) in enumerate(zip(local, global_))]


def test_summary_takes_the_mean_of_the_last_rounds_and_time_per_client_round():
    runs = [record("fedavg", rounds([0.1, 0.2, 0.3, 0.4], [0.0, 0.1, 0.2, 0.3], seconds=10.0)),
            record("fedgmkd", rounds([0.5, 0.5, 0.6, 0.7], [0.3, 0.3, 0.3, 0.6], seconds=25.0))]
    frame = chapter.summary(runs, last=2)
    fedavg, fedgmkd = frame.iloc[0], frame.iloc[1]
    assert fedavg.local == pytest.approx(0.35) and fedavg["global"] == pytest.approx(0.25)
    assert fedgmkd.local == pytest.approx(0.65) and fedgmkd["global"] == pytest.approx(0.45)
    assert fedavg.seconds_per_client_round == pytest.approx(1.0) and fedavg.upload_mb == pytest.approx(1.0)
    ratios = chapter.time_ratios(frame).set_index("method").ratio
    assert ratios["fedgmkd"] == pytest.approx(2.5) and ratios["fedavg"] == 1.0
    # a run slowed by other work: its rounds' median ignores a slow round, and a slower seed is not counted
    slow_round = rounds([0.1] * 3, [0.1] * 3, seconds=10.0)
    slow_round[1]["seconds"] = 100.0
    assert chapter.summary([record("fedavg", slow_round)]).seconds_per_client_round.iloc[0] == pytest.approx(1.0)
    slow_seed = frame.iloc[[0]].assign(seed=1, seconds_per_client_round=3.0)
    ratios = chapter.time_ratios(pd.concat([frame, slow_seed])).set_index("method").ratio
    assert ratios["fedgmkd"] == pytest.approx(2.5)
    long = chapter.long_accuracies(frame)
    assert len(long) == 4 and set(long.metric) == {"local", "global"}


def test_cost_ratios_compare_methods_only_on_the_same_machine():
    slow_cpu = "AMD EPYC (family 23 model 1, AVX2)"
    runs = [record("fedavg", rounds([0.1] * 3, [0.1] * 3, seconds=10.0)),
            record("fedgmkd", rounds([0.1] * 3, [0.1] * 3, seconds=25.0)),
            record("fedavg", rounds([0.1] * 3, [0.1] * 3, seconds=30.0), seed=1, machine=slow_cpu),
            record("fedgmkd", rounds([0.1] * 3, [0.1] * 3, seconds=60.0), seed=1, machine=slow_cpu)]
    ratios = chapter.time_ratios(chapter.summary(runs)).set_index(["machine", "method"]).ratio
    assert ratios[("AMD EPYC (family 25 model 17, AVX512-BF16)", "fedgmkd")] == pytest.approx(2.5)
    assert ratios[(slow_cpu, "fedgmkd")] == pytest.approx(2.0)


def test_only_runs_of_the_reduced_method_stand_in_for_cells():
    same = chapter.Params(methods="fedavg,fedgmkd", clients="10", batch_size=64, max_components=6)
    assert chapter.method_differences(same) == []
    covered = [SimpleNamespace(config=chapter.run_config(same, "fedavg", 10, 0).resolved())]
    assert chapter.experiments_to_run(same, covered) == chapter.experiments(same)[1:]
    other = replace(same, lr=0.01)
    assert chapter.method_differences(other) == ["lr"]
    assert chapter.experiments_to_run(other, covered) == chapter.experiments(other)
    assert chapter.experiments_to_run(replace(same, reuse_reduced=False), covered) == chapter.experiments(same)


def test_prototype_identity_on_real_features():
    """On a trained cnn5_code32's features of real CIFAR-10 images: the paper's Eq. 5 prototype is
    the class mean whatever the number of components (BIC's and fixed ones), and the released
    code's prototype is zero."""
    table = chapter.prototype_identity(chapter.Params(max_components=3), epochs=1, fixed=(2, 3))
    assert len(table) >= 5 and (table["images"] > 0).all()
    assert table["M by BIC"].between(0, 3).all()
    gaps = table.filter(like="‖Eq. 5 − class mean‖")
    assert gaps.columns.tolist() == ["‖Eq. 5 − class mean‖", "‖Eq. 5 − class mean‖, M = 2",
                                     "‖Eq. 5 − class mean‖, M = 3"]
    fitted = table["images"] >= 3  # a class with fewer images than components has no fixed-M fit
    assert gaps[fitted].notna().all().all() and gaps[~fitted].iloc[:, -1].isna().all()
    assert (gaps[fitted].max(axis=1) < 1e-4 * table["‖class mean‖"][fitted]).all()
    assert table.filter(like="mean largest γ")[fitted].stack().between(1 / 3, 1).all()
    assert (table["‖code prototype‖"] < 1e-6).all()
    assert (table["‖class mean‖"] > 1e-2).all()


def test_on_a_mixture_whose_components_overlap_eq5_is_the_mean_up_to_ems_stopping_error():
    """BIC finds several components that share points; Eq. 5 moves towards the mean as EM's
    tolerance shrinks, and Σ π_m μ_m is the mean to rounding at every tolerance."""
    table = chapter.mixture_identity(1, 6, tolerances=(1e-3, 1e-9))
    assert table["EM tolerance"].tolist() == [1e-3, 1e-9]
    assert (table.components > 1).all() and (table.components == table.components.iloc[0]).all()
    assert table["mean largest γ"].between(0.5, 0.99).all()  # points shared among components: not a partition
    loose, tight = table["‖Eq. 5 − mean‖"]
    assert tight < loose / 100 and loose < 0.05 * table["‖mean‖"].iloc[0]
    assert (table["‖Σ π_m μ_m − mean‖"] < 1e-12).all()
    assert table["EM iterations"].iloc[1] > table["EM iterations"].iloc[0]
    assert chapter.hand_made_mixture().shape == (sum(chapter.analysis.MIXTURE_COUNTS), 2)


def test_a_bigger_model_has_more_parameters():
    assert 10_000 < chapter.parameter_count("cnn5_code32") < chapter.parameter_count("resnet18_code32")


def comparison(rows: list[tuple], profile: str = "reduced") -> pd.DataFrame:
    """A compare_with_paper-like table from (method, clients, metric, ours, paper) rows."""
    frame = pd.DataFrame(rows, columns=["method", "clients", "metric", "mean_ours", "mean_paper"])
    return frame.assign(profile=profile)


def test_first_places_and_gains_count_the_columns_of_one_profile():
    table = comparison([("fedavg", 10, "local", 50.0, 60.0), ("fedgmkd", 10, "local", 52.0, 65.0),
                        ("fedgen", 10, "local", 53.0, 61.0),
                        ("fedavg", 10, "global", 40.0, 50.0), ("fedgmkd", 10, "global", 39.0, 55.0),
                        ("fedgen", 10, "global", 40.0, 51.0),
                        ("fjord", 10, "global", None, 70.0)])  # not run: neither side counts it
    ours, paper = chapter.first_places(table, "mean_ours"), chapter.first_places(table, "mean_paper")
    assert ours.to_dict() == {"fedgen": 2, "fedavg": 1}  # a tie: both count
    assert paper.to_dict() == {"fedgmkd": 2}
    gains = chapter.gains_over(table, "mean_ours", "fedgmkd", "fedavg")
    assert sorted(gains.tolist()) == [-1.0, 2.0]
    assert chapter.gains_text(gains) == "from -1.00 to +2.00 points, above 0 in 1 of 2 columns"
    assert chapter.gains_over(table, "mean_ours", "fpl", "fedavg").empty
    names = {"fedgen": "FedGen", "fedavg": "FedAvg", "fedgmkd": "FedGMKD"}
    assert chapter.first_places_text(ours, names) == "FedGen in 2, FedAvg in 1"
    [line] = chapter.ranking_summary(table, names)
    assert line.startswith("**reduced profile**, 2 columns.") and "ours: FedGen in 2, FedAvg in 1" in line
    assert "the paper's: FedGMKD in 2" in line and "the paper's: from +5.00 to +5.00 points, above 0 in 2 of 2" in line
    two = pd.concat([table, comparison([("fedavg", 10, "local", 1.0, 60.0), ("fedgmkd", 10, "local", 2.0, 65.0)], "quick")])
    lines = chapter.ranking_summary(two, names)
    assert len(lines) == 2 and lines[1].startswith("**quick profile**, 1 columns.")


def test_table5_sets_beside_the_paper_only_settings_other_than_table_1s():
    paper = chapter.paper_table5()
    default_only = pd.DataFrame({"lam": [0.06, 0.06], "gamma": [0.06, 0.06], "metric": ["local", "global"]})
    shown, default, not_run = chapter.table5_cells(default_only, paper)
    assert shown.empty and len(default) == 2 and len(not_run) == len(paper) - 2
    assert chapter.weight_pairs_text(default) == "(0.06, 0.06)"
    assert chapter.weight_pairs_text(not_run).startswith("(0.06, 0), (0.06, 0.02)")
    varied = pd.concat([default_only, pd.DataFrame({"lam": [0.06], "gamma": [0.0], "metric": ["local"]})])
    shown, default, not_run = chapter.table5_cells(varied, paper)
    assert chapter.weight_pairs_text(shown) == "(0.06, 0), (0.06, 0.06)" and len(shown) == 4 and default.empty  # paper order
    assert len(not_run) == len(paper) - 4
    shown, default, not_run = chapter.table5_cells(varied.iloc[:0], paper)
    assert shown.empty and default.empty and len(not_run) == len(paper)


def test_the_settings_table_has_a_column_per_profile_shown():
    quick = chapter.Params(**yaml.safe_load((ROOT / "notebooks" / "params" / "quick" / "fedgmkd.yaml").read_text()))
    profiles = chapter.profiles_shown(quick)
    assert list(profiles) == ["quick profile (this page)", "reduced profile (the committed records)"]
    assert profiles["reduced profile (the committed records)"] is chapter.REDUCED_PROFILE
    assert list(chapter.profiles_shown(chapter.REDUCED_PROFILE)) == ["reduced profile (this page; the committed records)"]
    table = chapter.settings_table(profiles).set_index("method")
    assert table.columns.tolist() == [*profiles, "source"]
    shared = table.loc["shared"]
    assert "3 rounds" in shared.iloc[0] and "10 clients with 200 images each" in shared.iloc[0]
    assert "15 rounds" in shared.iloc[1] and "10, 20, 50 clients with 500 images each" in shared.iloc[1]
    assert table.loc["FedProx"].iloc[:2].tolist() == ["mu 0.5, personal trained"] * 2
    smoke = chapter.settings_table(chapter.profiles_shown(chapter.Params())).set_index("method")
    assert smoke.loc["FedProx"].iloc[:2].tolist() == ["not run", "mu 0.5, personal trained"]
    assert "FedGMKD (only CKF)" not in smoke.index  # no profile runs it


# --- the chapter's tables from hand-made summary rows ---------------------------------------------

def summary_rows(**columns) -> pd.DataFrame:
    """:func:`chapter.summary`-like rows: ``columns`` as lists, the rest at one cell's values."""
    count = len(next(iter(columns.values())))
    base = {"method": "fedgmkd", "clients": 10, "alpha": 0.5, "lam": 0.06, "gamma": 0.06, "seed": 0, "rounds": 15,
            "local": 0.6, "global": 0.5, "seconds_per_client_round": 1.0, "upload_mb": 1.0, "download_mb": 1.0,
            "profile": "reduced", "precision": "fp32", "machine": "AMD EPYC (family 25 model 17, AVX512-BF16)"}
    return pd.DataFrame({**{key: [value] * count for key, value in base.items()}, **columns})


def test_table5_rows_are_fedgmkd_at_the_first_client_count_and_alpha_at_every_weight_pair():
    frame = summary_rows(method=["fedgmkd", "fedgmkd", "fedgmkd", "fedavg", "fedgmkd"], clients=[10, 10, 20, 10, 10],
                         alpha=[0.5, 0.5, 0.5, 0.5, 0.2], lam=[0.06, 0.0, 0.06, None, 0.06])
    assert chapter.table5_rows(frame, 10, 0.5).index.tolist() == [0, 1]


def test_accuracy_per_profile_gives_mean_and_std_over_seeds_per_metric():
    frame = summary_rows(seed=[0, 1], local=[0.6, 0.8], **{"global": [0.4, 0.5]})
    table = chapter.accuracy_per_profile(frame, ["method", "clients", "metric"]).set_index("metric")
    assert table.loc["local", ["mean", "std"]].tolist() == pytest.approx([70.0, 10.0])
    assert table.loc["global", ["mean", "std"]].tolist() == pytest.approx([45.0, 5.0])


def test_cost_table_sets_each_profiles_ratio_beside_the_papers_and_names_machines_only_where_several():
    zen, zen4 = "AMD EPYC (family 23 model 1, AVX2)", "AMD EPYC (family 25 model 17, AVX512-BF16)"
    ratios = pd.DataFrame({"profile": ["reduced"] * 4 + ["quick"] * 2, "machine": [zen, zen, zen4, zen4, zen, zen],
                           "clients": [10] * 6, "method": ["fedavg", "fedgmkd"] * 3,
                           "seconds_per_client_round": [1.0, 3.0, 0.5, 1.0, 2.0, 5.0]})
    ratios = ratios.assign(ratio=[1.0, 3.0, 1.0, 2.0, 1.0, 2.5])
    cost = chapter.cost_table(ratios).set_index("method")
    assert cost.loc["fedgmkd", "paper s"] == 251.55 and cost.loc["fedgmkd", "paper ratio"] == pytest.approx(251.55 / 98.94)
    assert cost.loc["fedgmkd", "reduced, 10 clients, AMD EPYC Zen: ratio"] == 3.0
    assert cost.loc["fedgmkd", "reduced, 10 clients, AMD EPYC Zen 4: ratio"] == 2.0
    assert cost.loc["fedgmkd", "quick, 10 clients: ratio"] == 2.5  # one machine: not named
    assert chapter.cost_table(None).columns.tolist() == ["method", "paper s", "paper ratio"]
    gmkd = chapter.fedgmkd_cost(ratios)
    assert gmkd[["profile", "clients", "ratio"]].values.tolist() == [["quick", 10, 2.5], ["reduced", 10, 3.0],
                                                                     ["reduced", 10, 2.0]]
    assert gmkd.paper_ratio.tolist() == pytest.approx([251.55 / 98.94] * 3)


def test_cost_tables_fit_the_column_one_narrow_table_per_profile_and_machine():
    """Issue 61: the time table had 15 columns (787 px in a 676 px column, headers broken into
    fragments); now one table per profile and machine, a column per client count, each cell a ratio
    with its seconds."""
    zen, zen4 = "AMD EPYC (family 23 model 1, AVX2)", "AMD EPYC (family 25 model 17, AVX512-BF16)"
    ratios = pd.DataFrame({"profile": ["reduced"] * 6, "machine": [zen] * 4 + [zen4] * 2,
                           "clients": [10, 10, 20, 20, 10, 10], "method": ["fedavg", "fedgmkd"] * 3,
                           "seconds_per_client_round": [1.0, 3.0, 2.0, 5.0, 0.5, 1.0]})
    ratios = ratios.assign(ratio=[1.0, 3.0, 1.0, 2.5, 1.0, 2.0])
    shown = chapter.cost_tables(ratios)
    assert [title for title, _ in shown] == ["reduced profile, AMD EPYC Zen", "reduced profile, AMD EPYC Zen 4"]
    first = shown[0][1].set_index("method")
    assert first.columns.tolist() == ["paper, 2 A100s", "10 clients", "20 clients"]
    assert first.loc["fedgmkd", "10 clients"] == "3.00× (3 s)" and first.loc["fedgmkd", "20 clients"] == "2.50× (5 s)"
    assert first.loc["fedgmkd", "paper, 2 A100s"] == "2.54× (252 s)"
    assert first.loc["fedprox", "10 clients"] == "—"  # a method of the paper's not measured here
    assert all(len(table.columns) <= 5 for _, table in shown)
    assert chapter.cost_tables(None)[0][1].columns.tolist() == ["method", "paper, 2 A100s"]


def test_traffic_is_kilobytes_per_client_round_and_the_upload_against_fedavgs_at_the_same_count():
    frame = summary_rows(method=["fedavg", "fedgmkd", "fedgmkd", "fedgmkd"], clients=[10, 10, 10, 20],
                         upload_mb=[2.0, 2.1, 2.3, 5.0], download_mb=[2.0, 2.0, 2.0, 2.0])
    traffic = chapter.traffic_table(frame).set_index(["method", "clients"])
    assert traffic.loc[("fedgmkd", 10), "upload (kB per client-round)"] == pytest.approx(2200.0)
    assert traffic.loc[("fedgmkd", 10), "upload vs FedAvg"] == "1.100×"
    assert traffic.loc[("fedgmkd", 20), "upload vs FedAvg"] == "—"


def test_the_hyperparameter_table_states_what_every_method_runs_with_exactly():
    params = chapter.Params()
    used = {key: chapter.used_here(params, key) for key in chapter.METHODS}
    assert all(used.values()), used  # FedGen and FjORD run their configs' defaults: stated, not blank
    assert used["fedgen"] == ("hidden_dim 512, generator_epochs 5, generative_alpha 10, generative_beta 10, "
                              "decay 0.98")
    assert used["fjord"].startswith("widths {0.2, 0.4, 0.6, 0.8, 1}") and "temperature 0.7" in used["fjord"]
    assert used["fedprox"] == "mu 0.5, personal trained"


def test_the_dat_shift_table_shows_a_few_rounds_the_last_and_the_mean_over_seeds():
    rows = [{"profile": "reduced", "method": "fedgmkd", "clients": 10, "seed": seed, "round": r,
             "dat_shift": 0.1 * r + 0.01 * seed} for seed in (0, 1) for r in range(1, 16)]
    rows += [{"profile": "reduced", "method": "fedavg", "clients": 10, "seed": 0, "round": r, "dat_shift": float("nan")}
             for r in range(1, 16)]
    table = chapter.dat_shift_table(pd.DataFrame(rows))
    assert list(table.columns) == ["profile", "method", "clients", "round 1", "round 2", "round 5", "round 10",
                                   "last round", "mean over rounds"]
    assert len(table) == 1  # FedAvg has no DAT
    row = table.iloc[0]
    assert row["round 5"] == pytest.approx(0.5 + 0.005) and row["last round"] == pytest.approx(1.5 + 0.005)
    assert row["mean over rounds"] == pytest.approx(0.8 + 0.005)
    assert chapter.dat_shift_table(pd.DataFrame(rows[-15:])).empty


def test_the_round_budget_table_reads_each_redesign_run_at_round_15_and_at_its_end():
    """A run that rises until round 20 and then stays flat: still rising when stopped at round 15
    (6 points over its last 20%), 14 points lower there than at round 50, flat at the end."""
    params = replace(chapter.Params(methods="fedavg,fedgmkd"), rounds=50, alpha=chapter.REDESIGN_PROFILE.alpha)
    curve = [min(0.2 + 0.02 * r, 0.6) for r in range(1, 51)]

    def run(method, seed, shift=0.0):
        config = chapter.run_config(params, method, 10, seed).resolved()
        return SimpleNamespace(config=config, history=rounds([c + shift for c in curve], [c + shift for c in curve]))

    assert chapter.window_mean(rounds(curve, curve), "global_acc", 15, 5) == pytest.approx(0.46)
    assert chapter.late_reading(rounds(curve, curve), "global_acc", 15) == {"late_gain": pytest.approx(6.0),
                                                                          "evaluations": 15}
    assert chapter.late_reading(rounds(curve, curve), "global_acc", 50)["late_gain"] == pytest.approx(0.0)
    table = chapter.round_budget_table([run("fedavg", 0), run("fedavg", 1, 0.01), run("fedgmkd", 0)], early=15, last=5)
    fedavg = table.set_index("method").loc["FedAvg"]
    assert fedavg["seeds"] == 2 and fedavg["clients"] == 10
    assert fedavg["round 15"] == pytest.approx(46.5) and fedavg["final"] == pytest.approx(60.5)
    assert fedavg["gain (points)"] == pytest.approx(14.0)
    assert (fedavg["gate at round 15"], fedavg["gate at the end"]) == ("rising (+6.00)", "flat (0.00)")  # a zero gain has no sign
    assert list(table.method) == ["FedAvg", "FedGMKD"]
    assert chapter.round_budget_table([]).empty


def test_the_round_budget_tables_gate_word_is_the_gates_mean_over_seeds():
    """The gate judges a method's mean late gain over seeds: seeds at 0, 0, +3.5 are rising (mean
    1.17), seeds at +1.2, +1.2, -1.0 are not; a run with no late evaluation counts as rising."""
    evaluations = pd.Series([15, 15, 15])
    assert chapter.gate_text(pd.Series([0.0, 0.0, 3.5]), evaluations) == "rising (+1.17)"
    assert chapter.gate_text(pd.Series([1.2, 1.2, -1.0]), evaluations) == "flat (+0.47)"
    assert chapter.gate_text(pd.Series([0.2, float("nan"), 0.1]), evaluations) == "rising (not evaluated late)"
    assert chapter.gate_text(pd.Series([0.2, 0.1, 0.1]), pd.Series([5, 15, 15])) == "too few evaluations (5)"


def test_the_claims_page_says_how_far_the_50_round_rerun_has_got(tmp_path):
    rows = chapter.ledger_rows(tmp_path)  # no records here: none committed, none of the rerun
    judged = rows[rows.verdict != "not testable offline"]
    planned = len(chapter.experiments(chapter.REDESIGN_PROFILE))
    assert len(judged) and all(f"has 0 of {planned} runs committed" in scale for scale in judged.scale)


def test_the_verdicts_move_to_the_50_round_rerun_only_once_every_run_is_finished(tmp_path, monkeypatch):
    """Until the rerun is complete the verdicts read the 15-round profile under the convergence
    gate; then the rerun at the paper's own T, every cell counted. A diverged run is finished."""
    from fedkd_core import results
    from fedkd_core.chapters.fedgmkd import redesign

    planned = chapter.experiments(chapter.REDESIGN_PROFILE)
    empty = chapter.verdict_basis(tmp_path)
    assert empty.params == chapter.REDUCED_PROFILE and empty.records == [] and empty.enforce_gate
    text = chapter.verdict_basis_text(tmp_path)
    assert f"**0 of the {len(planned)} runs**" in text and "move to it once all of them are" in text
    assert empty.scale.endswith("500 images per client, 15 rounds (the paper: 50)")
    from types import SimpleNamespace

    records = [SimpleNamespace(key=results.config_hash(config)) for config in planned[:-1]]
    monkeypatch.setattr(redesign, "redesign_records", lambda root=None: records)
    assert chapter.verdict_basis(tmp_path).params == chapter.REDUCED_PROFILE  # one run short
    results.save_divergence(results.Divergence(config=planned[-1].resolved(), key=results.config_hash(planned[-1]),
                                               round=3, error="non-finite loss", history=[], timings={},
                                               environment={}, profile="reduced"), tmp_path)
    rerun = chapter.verdict_basis(tmp_path)
    assert rerun.params == chapter.REDESIGN_PROFILE and not rerun.enforce_gate
    assert rerun.scale == "reduced: cnn5_code32 (the paper: ResNet-18), 500 images per client, 50 rounds (the paper's)"
    assert "the verdicts have moved to it" in chapter.verdict_basis_text(tmp_path)


def test_the_gate_sensitivity_shows_a_claim_counted_at_the_papers_budget_and_left_out_by_the_gate():
    """FedGMKD 14 points above a flat FedAvg in all three seeds, but still rising by 2 points over
    its last 10 rounds: counted, the claim holds; with the gate, its only cell is left out."""
    params = replace(chapter.Params(methods="fedavg,fedgmkd"), rounds=50, alpha=chapter.REDESIGN_PROFILE.alpha)

    def run(method, seed):
        curve = [0.5 + 0.001 * seed if method == "fedavg" else 0.54 + 0.002 * r + 0.002 * seed for r in range(1, 51)]
        config = chapter.run_config(params, method, 10, seed).resolved()
        return SimpleNamespace(config=config, history=rounds(curve, curve), profile="reduced",
                               environment={"precision": "fp32", "device_name": "a machine"})

    table = chapter.gate_sensitivity([run(m, s) for m in ("fedavg", "fedgmkd") for s in range(3)]).set_index("claim")
    row = table.loc["FedGMKD beats FedAvg"]
    # local and global: two readings of the same runs, one unit of evidence, so the word names the cells
    assert row["every cell counted"].startswith("holds on these 2 cells +") and row["cells"] == 2
    assert row["rising cells left out"].startswith("untested at this scale") and row["cells left"] == 0
    assert row["differ"] == "⚑"
