"""Robustness grids: variants as data around a base profile, shared runs reused, claims counted
per variant from per-(cell, seed) effects."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from fedkd_core.chapters import fedckd, fedgmkd, fedua, knfu
from fedkd_core.chapters import robustness as rb
from fedkd_core.results import config_hash
from fedkd_core.sweep import load_grid

ROOT = Path(__file__).resolve().parents[1]
BASE_FILE = ROOT / "notebooks" / "params" / "robustness" / "knfu.yaml"
KNFU_READING = knfu.ROBUSTNESS[0].name  # the chapter's own reading of what the paper leaves open


def base() -> knfu.Params:
    return knfu.Params(**yaml.safe_load(BASE_FILE.read_text()))


def test_the_yaml_is_the_chapters_robustness_base():
    assert base() == knfu.ROBUSTNESS_BASE


def test_the_base_is_the_paper_profile_at_the_claims_cells():
    """So that the chapter's own reading reuses the committed paper records (same keys)."""
    ours = base()
    paper_keys = {config_hash(c) for c in knfu.experiments(knfu.PAPER_PROFILE)}
    assert {config_hash(c) for c in knfu.experiments(ours)} <= paper_keys
    assert knfu.method_differences(replace(ours, profile="paper")) == []


def test_variants_change_only_what_they_name_and_share_the_rest():
    configs = rb.experiments(knfu, base())
    assert len({config_hash(c) for c in configs}) == len(configs)
    reading = {config_hash(c) for c in knfu.experiments(base())}
    for variant in knfu.ROBUSTNESS[1:]:
        changed = {config_hash(c) for c in knfu.experiments(rb.variant_params(base(), variant))} - reading
        assert changed, variant.name
        if "entropy_threshold" in variant.overrides:  # only Selective-FD runs again: 3 alphas x 3 seeds
            assert len(changed) == 9
    with pytest.raises(TypeError, match="not_a_field"):
        rb.variant_params(base(), rb.Variant("bad", {"not_a_field": 1}))


def test_the_sweep_runs_the_robustness_grid_with_the_flag():
    params, configs = load_grid("knfu", BASE_FILE, robustness=True)
    assert params.profile == "robustness"
    assert sorted(map(config_hash, configs)) == sorted(map(config_hash, rb.experiments(knfu, params)))
    with pytest.raises(SystemExit, match="no robustness variants"):
        load_grid("setting", ROOT / "notebooks" / "params" / "quick" / "setting.yaml", robustness=True)


def test_a_robustness_sweep_finishes_the_variant_nearest_completion_first(monkeypatch):
    """A variant counts only when all its runs are committed: a sweep stopped early must leave
    whole variants done, so it claims variant by variant, fewest runs left first, seed by seed."""
    from fedkd_core import results

    params = base()
    grid = {v.name: knfu.experiments(rb.variant_params(params, v)) for v in knfu.ROBUSTNESS}
    almost = grid["R = 30 rounds"][:-1]  # one run left
    done = {config_hash(c) for c in grid[KNFU_READING] + almost}
    monkeypatch.setattr(results, "load_record", lambda config, root=None: True if config_hash(config) in done else None)
    order = [c for c in rb.sweep_order(knfu, params) if config_hash(c) not in done]
    assert config_hash(order[0]) == config_hash(grid["R = 30 rounds"][-1])
    threshold_runs = {config_hash(c) for c in grid["Selective-FD τ = 0.9 ln C"]} - done  # 9 left: next
    assert {config_hash(c) for c in order[1:10]} == threshold_runs
    sgd = [c for c in order if config_hash(c) in {config_hash(g) for g in grid["SGD, lr 0.01, momentum 0.9"]}]
    assert [c.seed for c in sgd] == sorted(c.seed for c in sgd)  # seed by seed within a variant
    assert sorted(map(config_hash, rb.sweep_order(knfu, params))) == sorted(map(config_hash, rb.experiments(knfu, params)))


def test_the_sweep_runs_only_the_named_variants_with_variant():
    """``--variant`` runs one variant's grid first (e.g. the cheap Selective-FD threshold ones);
    names match case-insensitively, and a wrong name lists the chapter's names."""
    threshold = "Selective-FD without server filter"
    params, configs = load_grid("knfu", BASE_FILE, robustness=True, variants=(threshold.upper(),))
    expected = knfu.experiments(rb.variant_params(params, rb.selected_variants(knfu, (threshold,))[0]))
    assert [config_hash(c) for c in configs] == [config_hash(c) for c in expected]
    assert {c.algorithm for c in configs} == {"knfu", "fedmd", "selective_fd", "knfu_local"}
    both = rb.selected_variants(knfu, ("λ = 2", KNFU_READING))
    assert [v.name for v in both] == [KNFU_READING, "λ = 2"]  # the chapter's order
    with pytest.raises(SystemExit, match="no robustness variant named 'lr 1'.*'R = 30 rounds'"):
        load_grid("knfu", BASE_FILE, robustness=True, variants=("lr 1",))
    with pytest.raises(SystemExit, match="needs --robustness"):
        load_grid("knfu", BASE_FILE, variants=(threshold,))


def test_summarised_effects_judge_each_claim_with_intervals_not_signs():
    effects = pd.DataFrame({"alpha": [0.1, 0.1, 0.5, 0.5], "seed": [0, 1, 0, 1],
                            "A > B": [0.02, -0.01, -0.03, 0.01], "C > D": [0.011, 0.010, None, None]})
    table = rb.summarise_effects(effects, ["alpha"]).set_index("claim")
    # per-cell means +0.5 and -1.0 points on 2 seeds that disagree: both cells inconclusive
    assert tuple(table.loc["A > B", ["holds in", "reversed", "of cells"]]) == (0, 0, 2)
    assert table.loc["A > B", "verdict"] == "inconclusive"
    assert table.loc["A > B", "effect"] == pytest.approx(-0.25)
    assert table.loc["A > B", "seed spread"] == pytest.approx(50 * abs(-0.005 - 0.0))  # per-seed means -0.005, 0.0
    # two seeds that agree closely decide: +1.05 points, interval above zero, on its one cell only
    assert tuple(table.loc["C > D", ["verdict", "holds in", "of cells", "seeds"]]) == ("holds on this cell", 1, 1, 2)
    assert table.loc["C > D", "low"] > 0
    # seeds whose effects cancel leave floating-point noise (0.1 + 0.2 - 0.3 > 0): inconclusive, not a win
    tie = pd.DataFrame({"alpha": [0.1] * 3, "seed": [0, 1, 2], "A > B": [0.1, 0.2, -0.3]})
    assert tie["A > B"].mean() > 0
    assert rb.summarise_effects(tie, ["alpha"]).set_index("claim").loc["A > B", "verdict"] == "inconclusive"


def test_a_variant_of_several_machines_widens_its_intervals_by_their_drift():
    effects = pd.DataFrame({"alpha": [0.1, 0.1, 0.1], "seed": [0, 1, 2], "A > B": [0.010, 0.011, 0.012]})
    narrow = rb.summarise_effects(effects, ["alpha"]).iloc[0]
    wide = rb.summarise_effects(effects, ["alpha"], widen=1.0).iloc[0]
    assert (narrow.verdict, wide.verdict) == ("holds on this cell", "inconclusive")  # +1.1 [+0.85, +1.35] vs [-0.15, +2.35]
    assert wide.low == pytest.approx(narrow.low - 1.0) and wide.high == pytest.approx(narrow.high + 1.0)


def test_variant_counts_use_complete_variants_only():
    table = pd.DataFrame({"variant": ["a", "b", "c"], "claim": ["X"] * 3, "verdict": ["holds", "inconclusive", "holds"],
                          "holds in": [3, 2, 3], "of cells": [3, 3, 3],
                          "effect": [1.0, 0.5, 2.0], "seed spread": [0.1] * 3, "seeds": [3] * 3, "runs": [36] * 3,
                          "complete": [True, True, False]})
    counts = rb.variant_counts(table).set_index("claim")
    assert tuple(counts.loc["X"]) == (1, 2, "holds in 1, inconclusive in 1")


def fake_record(config, alma: float) -> SimpleNamespace:
    stored = json.loads(json.dumps(config.resolved()))
    last = max(12, stored["rounds"])  # evaluated every round to the run's last, at least 12 times, flat: past the convergence gate
    history = [{"round": r, "alma": alma} for r in range(1, last + 1)]
    return SimpleNamespace(config=stored, final={"alma": alma, "client_acc_std": 0.0}, history=history,
                           client_accuracies=[], profile="robustness", environment={"precision": "fp32"})


def test_knfu_claim_effects_are_differences_of_alma_per_cell_and_seed():
    params = replace(base(), mnist_alphas="0.1", seeds=1)
    alma = {"knfu": 0.80, "fedmd": 0.75, "selective_fd": 0.78, "knfu_local": 0.79}
    records = [fake_record(c, alma[c.algorithm]) for c in knfu.experiments(params)]
    effects = knfu.claim_effects(records).iloc[0]
    assert effects["KnFu > FedMD"] == pytest.approx(0.05)
    assert effects["KnFu > Selective-FD"] == pytest.approx(0.02)
    assert knfu.LOCAL_ON_CIFAR not in effects  # a CIFAR-10 claim: these are MNIST cells


def test_fedckd_reduced_profile_keeps_the_papers_setting():
    params = fedckd.REDUCED_PROFILE
    configs = fedckd.experiments(params)
    assert {c.algorithm for c in configs} == set(fedckd.METHODS)
    assert all(c.data.num_clients == 20 and c.participation == 1.0 and c.train.epochs == 5 and c.train.batch_size == 64
               and c.train.optimizer == "sgd" and c.train.lr == 0.01 and c.train.momentum == 0.9 for c in configs)
    assert len(configs) == 8 * 2 * 3 + 3  # + Table IV's gamma = 1 runs


def test_fedckd_claim_effects_pair_runs_by_cell_and_seed():
    params = replace(fedckd.ROBUSTNESS_BASE, settings="practical", seeds=1)
    alma = {("pfedsd", None): 0.90, ("fedckd", 0.99): 0.93, ("fedckd", 1.0): 0.94}
    records = [fake_record(c, alma[(c.algorithm, c.algorithm_params.get("gamma"))]) for c in fedckd.experiments(params)]
    effects = fedckd.claim_effects(records).iloc[0]
    assert effects["FedCKD > pFedSD"] == pytest.approx(0.03)
    assert effects[fedckd.ANNEALING_CLAIM] == pytest.approx(-0.01)


def test_fedgmkd_robustness_base_reuses_the_reduced_runs():
    """(Each base is its yaml: tests/test_profiles.py.)"""
    params = fedgmkd.ROBUSTNESS_BASE
    reduced = {config_hash(c) for c in fedgmkd.experiments(fedgmkd.REDUCED_PROFILE)}
    assert {config_hash(c) for c in fedgmkd.experiments(params)} <= reduced  # the reading is the reduced records
    for variant in fedgmkd.ROBUSTNESS[1:]:
        assert {config_hash(c) for c in fedgmkd.experiments(rb.variant_params(params, variant))} - reduced, variant.name


def test_fedua_robustness_base_stays_on_the_first_reduced_design():
    """FedUA's reduced profile was redesigned and its robustness grid was not rerun: no run of the
    grid is a run of the reduced profile, so its verdicts never borrow the new design's records."""
    reduced = {config_hash(c) for c in fedua.experiments(fedua.REDUCED_PROFILE)}
    grid = rb.experiments(fedua, fedua.ROBUSTNESS_BASE)
    assert len(grid) == 225 and not {config_hash(c) for c in grid} & reduced


def test_fedgmkd_variants_rerun_only_fedgmkd():
    reading = {config_hash(c) for c in fedgmkd.experiments(fedgmkd.ROBUSTNESS_BASE)}
    for variant in fedgmkd.ROBUSTNESS[1:]:
        configs = fedgmkd.experiments(rb.variant_params(fedgmkd.ROBUSTNESS_BASE, variant))
        changed = [c for c in configs if config_hash(c) not in reading]
        assert len(changed) == 9 and {fedgmkd.cell_of(c)[0] for c in changed} == {"fedgmkd"}, variant.name


def run_record(config, value: float, rounds: int = 12) -> SimpleNamespace:
    """A stored-record stand-in whose every round has local and global accuracy ``value``."""
    row = {"alma": value, "global_acc": value, "seconds": 1.0, "clients": 1, "bytes_up": 0, "bytes_down": 0}
    return SimpleNamespace(config=json.loads(json.dumps(config.resolved())), final=row,
                           history=[{**row, "round": r} for r in range(1, rounds + 1)],
                           client_accuracies=[], profile="robustness", environment={"precision": "fp32"})


def test_fedua_claim_effects_follow_its_three_claims():
    params = replace(fedua.ROBUSTNESS_BASE, partitions="step,dir0.1", participations="1.0,0.5", seeds=1)
    acc = {("step", 1.0): {"fedavg": 0.60, "feddf": 0.70, "fedua": 0.75},
           ("step", 0.5): {"fedavg": 0.55, "feddf": 0.56, "fedua": 0.66},
           ("dir0.1", 1.0): {"fedavg": 0.50, "feddf": 0.49, "fedua": 0.60}}
    records = [run_record(c, acc[fedua.cell_of(c)[:2]][c.algorithm]) for c in fedua.experiments(params)]
    effects = fedua.claim_effects(records).set_index(["partition", "participation", "ratio"]).xs(1.0, level="ratio")
    assert effects.loc[("step", 1.0), "FedUA > FedDF > FedAvg"] == pytest.approx(0.05)  # min(0.05, 0.10)
    assert effects.loc[("dir0.1", 1.0), "FedUA > FedDF > FedAvg"] == pytest.approx(-0.01)
    assert effects.loc[("step", 0.5), "FedUA best at every C"] == pytest.approx(0.10)
    assert pd.isna(effects.loc[("dir0.1", 1.0), "FedUA best at every C"])  # Table 3 is on step only
    drop_feddf, drop_fedua = 1 - 0.56 / 0.70, 1 - 0.66 / 0.75
    assert effects.loc[("step", 0.5), "FedUA loses less than FedDF as C falls"] == pytest.approx(drop_feddf - drop_fedua)
    assert pd.isna(effects.loc[("step", 1.0), "FedUA loses less than FedDF as C falls"])


def test_fedgmkd_claim_effects_are_margins_per_metric():
    params = replace(fedgmkd.ROBUSTNESS_BASE, clients="10", seeds=1, methods="fedavg,fedprox,fedgmkd")
    acc = {"fedavg": 0.40, "fedprox": 0.45, "fedgmkd": 0.43}
    records = [run_record(c, acc[fedgmkd.cell_of(c)[0]]) for c in fedgmkd.experiments(params)]
    effects = fedgmkd.claim_effects(records)[lambda f: f.table == "Table 1"].set_index(["clients", "metric"])
    best_local = "FedGMKD has the best local accuracy of Table 1's methods (those run)"
    assert effects.loc[(10, "local"), best_local] == pytest.approx(-0.02)
    assert pd.isna(effects.loc[(10, "global"), best_local])
    assert effects.loc[(10, "global"), "FedGMKD beats FedAvg"] == pytest.approx(0.03)
    assert set(effects.columns) - {"seed", "table", "alpha"} <= set(fedgmkd.TABLE1_CLAIMS.values()) | {"FedGMKD beats FedAvg"}


def test_a_robustness_dry_run_lists_each_variants_runs(tmp_path, monkeypatch, capsys):
    from fedkd_core import sweep

    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    sweep.main(["knfu", "--params", str(BASE_FILE), "--robustness", "--dry-run", "--variant", "λ = 2",
                "--variant", "R = 30 rounds"])
    out = capsys.readouterr().out
    per_variant = len(knfu.experiments(base()))
    assert f"  R = 30 rounds: {per_variant} runs, 0 done\n  λ = 2: {per_variant} runs, 0 done" in out
    assert "SGD" not in out


def test_the_selective_fd_filter_table_reports_what_each_threshold_keeps(monkeypatch):
    """One row per threshold variant with records: the accepted and kept shares (round 1, mean over
    rounds) from the records' histories, Selective-FD's ALMA and KnFu's lead over it."""
    params = replace(base(), mnist_alphas="0.1", seeds=1)
    kept = {0.5: (0.0, 0.2), 1.0: (0.9, 0.9)}  # per threshold: kept share in rounds 1 and 2

    def records(module, base_params, variant, root=None):
        threshold = rb.variant_params(base_params, variant).entropy_threshold
        if threshold not in kept or variant.overrides.keys() - {"entropy_threshold"}:
            return []
        found = []
        for config in module.experiments(rb.variant_params(base_params, variant)):
            record = fake_record(config, {"knfu": 0.80, "selective_fd": 0.70 + threshold / 10}.get(config.algorithm, 0.6))
            if config.algorithm == "selective_fd":
                record.history = [{"round": r, "alma": record.final["alma"], "accepted_fraction": 0.9, "kept_fraction": k}
                                  for r, k in enumerate(kept[threshold], start=1)]
            found.append(record)
        return found

    monkeypatch.setattr(rb, "variant_records", records)
    table = knfu.selective_fd_filter_table(params).set_index("threshold")
    assert list(table.index) == ["0.5 ln C", "1 ln C"]
    assert table.loc["0.5 ln C", "kept, round 1 (%)"] == 0.0
    assert table.loc["0.5 ln C", "kept, mean over rounds (%)"] == pytest.approx(10.0)
    assert table.loc["1 ln C", "accepted, round 1 (%)"] == pytest.approx(90.0)
    assert table.loc["1 ln C", "Selective-FD ALMA (%)"] == pytest.approx(80.0)
    assert table.loc["0.5 ln C", "KnFu − Selective-FD (points)"] == pytest.approx(5.0)


def test_variants_made_on_several_machines_are_counted_and_named(monkeypatch):
    """The claim table counts each variant's machines, and a note names them where a variant mixes
    records of more than one (their drift is part of its effects)."""
    params = replace(base(), mnist_alphas="0.1", seeds=1)
    alma = {"knfu": 0.80, "fedmd": 0.75, "selective_fd": 0.78, "knfu_local": 0.79}

    def records(module, base_params, variant, root=None):
        if variant.name not in (KNFU_READING, "λ = 2"):
            return []
        lead = 0.02 if variant.name == "λ = 2" else 0.0  # a variant whose effects equal the reading's is not listed
        found = [fake_record(c, alma[c.algorithm] + lead * (c.algorithm == "knfu"))
                 for c in module.experiments(rb.variant_params(base_params, variant))]
        for record in found:
            record.environment = {"precision": "fp32", "device_name": "CPU A"}
        if variant.name == "λ = 2":
            found[0].environment = {"precision": "fp32", "device_name": "CPU B"}
        return found

    monkeypatch.setattr(rb, "variant_records", records)
    table = rb.claim_table(knfu, params)
    assert dict(zip(table.variant, table.machines)) == {KNFU_READING: 1, "λ = 2": 2}
    assert rb.machine_notes(rb.records_by_variant(knfu, params)) == [
        f"λ = 2: {len(knfu.experiments(params)) - 1} runs on CPU A, 1 runs on CPU B; 1 cell and seed pair runs of both"]


def test_changes_from_the_reading_name_the_complete_variants_that_change_a_verdict():
    table = pd.DataFrame({"variant": ["ours", "v1", "v2", "v3", "ours"], "claim": ["X", "X", "X", "X", "Y"],
                          "verdict": ["does not hold", "holds", "does not hold", "holds", "holds"],
                          "holds in": [0, 3, 0, 2, 1], "reversed": [3, 0, 2, 0, 0], "of cells": [3] * 5,
                          "effect": [-0.5, 0.29, -0.4, 1.0, 0.1], "low": [-0.7, 0.1, -0.6, 0.5, 0.05],
                          "high": [-0.3, 0.5, -0.2, 1.5, 0.15],
                          "seed spread": [0.1] * 5, "seeds": [3] * 5, "runs": [9] * 5,
                          "complete": [True, True, True, False, True]})
    assert rb.changes_from_reading(table, "ours") == [  # v2 keeps the verdict, v3 is incomplete
        "**X** does not hold under **ours** (-0.50 [-0.70, -0.30]); under **v1** it holds (+0.29 [+0.10, +0.50]; "
        "reversed in 0 of 3 cells)"]


def test_diverged_runs_complete_a_variant_and_leave_their_cells_out_of_its_claims(monkeypatch):
    """pFedSD diverging in one of two seeds: FedCKD > pFedSD is judged on the other seed, the
    annealing claim on both; the variant is complete (every run recorded or diverged), the table
    counts the diverged run and the chapter names it."""
    params = replace(fedckd.ROBUSTNESS_BASE, settings="practical", seeds=2)
    reading, literal = fedckd.ROBUSTNESS[0], next(v for v in fedckd.ROBUSTNESS if "student ‖ teacher" in v.name)
    alma = {("pfedsd", None): 0.90, ("fedckd", 0.99): 0.93, ("fedckd", 1.0): 0.94}

    def split(variant):
        configs = rb.variant_grid(fedckd, params, variant)
        broken = [c for c in configs if variant is literal and c.algorithm == "pfedsd" and c.seed == 1]
        return configs, broken

    def records(module, base_params, variant, root=None):
        configs, broken = split(variant)
        return [fake_record(c, alma[(c.algorithm, c.algorithm_params.get("gamma"))] + 0.01 * c.seed
                            + 0.01 * (variant is literal and c.algorithm_params.get("gamma") == 0.99))
                for c in configs if c not in broken and variant in (reading, literal)]

    def divergences(module, base_params, variant, root=None):
        return [SimpleNamespace(algorithm=c.algorithm, round=3 + c.seed) for c in split(variant)[1]]

    monkeypatch.setattr(rb, "variant_records", records)
    monkeypatch.setattr(rb, "variant_divergences", divergences)
    table = rb.claim_table(fedckd, params).set_index(["variant", "claim"])
    row = table.loc[(literal.name, "FedCKD > pFedSD")]
    assert (row["diverged"], row["complete"], row["seeds"], row["of cells"]) == (1, True, 1, 1)
    assert row["verdict"] == "inconclusive"  # one seed cannot decide
    assert row["effect"] == pytest.approx(4.0)  # seed 0 only: 0.94 - 0.90
    assert table.loc[(literal.name, fedckd.ANNEALING_CLAIM), "seeds"] == 2
    assert table.loc[(reading.name, "FedCKD > pFedSD"), "diverged"] == 0
    assert rb.divergence_texts(rb.divergences_by_variant(fedckd, params)) == {literal.name: "pFedSD diverged in 1 run (round 4)"}


def test_divergence_texts_give_each_methods_runs_and_rounds():
    runs = [SimpleNamespace(algorithm="pfedsd", round=r) for r in (2, 3, 2)] + [SimpleNamespace(algorithm="fedckd", round=5)]
    assert rb.divergence_texts({"v": runs, "w": []}) == {
        "v": "FedCKD diverged in 1 run (round 5); pFedSD diverged in 3 runs (rounds 2-3)"}  # the papers' names


def test_effect_shifts_name_complete_variants_that_move_an_effect_beyond_both_intervals():
    effect = [2.0, 0.1, 1.5, 5.0, 4.0, 9.0, 7.0]
    half = [0.6, 0.8, 0.2, 0.5, 3.5, 0.0, float("nan")]
    table = pd.DataFrame({"variant": ["ours", "v1", "v2", "v3", "v4", "v5", "v6"], "claim": ["X"] * 7,
                          "verdict": ["holds"] * 7, "effect": effect,
                          "low": [e - h for e, h in zip(effect, half)], "high": [e + h for e, h in zip(effect, half)],
                          "of cells": [2] * 7, "seeds": [3, 3, 3, 3, 3, 1, 3],
                          "complete": [True, True, True, False, True, True, True]})
    # v1 moved 1.9 > √(0.6² + 0.8²) = 1.0; v2 0.5 <= √(0.36 + 0.04); v3 incomplete; v4 moved 2.0 <= √(0.36 + 12.25);
    # v5 judged on 1 seed; v6 has no interval: nothing says it moved
    assert rb.effect_shifts(table, "ours") == ["**X**: +2.0 [+1.4, +2.6] points under **ours**; "
                                               "+0.10 [-0.70, +0.90] with v1"]


def test_a_claim_whose_methods_diverged_in_every_run_of_a_variant_is_unjudged_there(monkeypatch):
    """pFedSD diverging in every run of a variant: FedCKD > pFedSD gets a row with no cells there
    (shown, not counted), the annealing claim is judged as usual; a variant whose runs all
    diverged still appears."""
    params = replace(fedckd.ROBUSTNESS_BASE, settings="practical", seeds=1)
    reading, literal, no_t2 = fedckd.ROBUSTNESS[0], fedckd.ROBUSTNESS[1], fedckd.ROBUSTNESS[2]
    alma = {("pfedsd", None): 0.90, ("fedckd", 0.99): 0.93, ("fedckd", 1.0): 0.94}
    broken = {literal.name: lambda c: c.algorithm == "pfedsd", no_t2.name: lambda c: True}

    def configs(variant, diverged):
        chosen = broken.get(variant.name, lambda c: False)
        return [c for c in rb.variant_grid(fedckd, params, variant) if chosen(c) == diverged]

    monkeypatch.setattr(rb, "variant_records", lambda m, b, variant, root=None: [
        fake_record(c, alma[(c.algorithm, c.algorithm_params.get("gamma"))]
                    + 0.01 * (variant is literal and c.algorithm_params.get("gamma") == 0.99))
        for c in configs(variant, False) if variant in (reading, literal)])
    monkeypatch.setattr(rb, "variant_divergences", lambda m, b, variant, root=None: [
        SimpleNamespace(algorithm=c.algorithm, round=2) for c in configs(variant, True)])
    table = rb.claim_table(fedckd, params).set_index(["variant", "claim"])
    unjudged = table.loc[(literal.name, "FedCKD > pFedSD")]
    assert (unjudged["of cells"], unjudged["holds in"], unjudged["diverged"], unjudged["complete"]) == (0, 0, 1, True)
    assert table.loc[(literal.name, fedckd.ANNEALING_CLAIM), "of cells"] == 1
    assert set(table.loc[no_t2.name].index) == {"FedCKD > pFedSD", fedckd.ANNEALING_CLAIM}  # all diverged: both unjudged
    assert (table.loc[no_t2.name, "of cells"] == 0).all() and (table.loc[no_t2.name, "runs"] == 0).all()
    counts = rb.variant_counts(table.reset_index()).set_index("claim")
    assert counts.loc["FedCKD > pFedSD", "variants"] == 1  # only the reading judged it
    assert rb.changes_from_reading(table.reset_index(), reading.name) == []


def test_the_effects_plot_draws_each_claim_over_its_complete_variants_marking_where_it_holds():
    """Each variant's pooled effect with its interval; filled where the verdict is "holds"."""
    import matplotlib
    matplotlib.use("Agg")
    nan = float("nan")
    table = pd.DataFrame({"variant": ["ours", "v1", "v2", "ours", "v1"], "claim": ["X", "X", "X", "Y", "Y"],
                          "verdict": ["holds", "inconclusive", "holds", "holds", "not judged"],
                          "holds in": [3, 1, 3, 2, 0], "of cells": [3, 3, 3, 2, 0],
                          "effect": [1.5, -0.5, 9.0, 0.2, nan], "low": [1.0, -1.5, 8.0, 0.1, nan],
                          "high": [2.0, 0.5, 10.0, 0.3, nan], "seed spread": [0.3, 0.4, 0.1, 0.2, nan],
                          "seeds": [3] * 4 + [0], "runs": [9] * 5, "complete": [True, True, False, True, True]})
    fig = rb.plot_effects(table, "ours")
    x_axis, y_axis = fig.axes
    assert (x_axis.get_title(), y_axis.get_title()) == ("X", "Y")
    # v2 is still running, v1 judged nothing of Y: neither is drawn there
    rows_top_down = lambda ax: [t.get_text() for _, t in sorted(zip(ax.get_yticks(), ax.get_yticklabels()), key=lambda p: -p[0])]  # noqa: E731
    assert rows_top_down(x_axis) == ["ours (holds)", "v1 (inconclusive)"]  # the reading first, as in the table
    assert rows_top_down(y_axis) == ["ours (holds)"]
    markers = [line for line in x_axis.get_lines() if line.get_marker() == "o"]
    ours, v1 = markers  # drawn in table order
    assert (ours.get_xdata()[0], v1.get_xdata()[0]) == (1.5, -0.5)
    assert ours.get_markerfacecolor() == ours.get_color() and v1.get_markerfacecolor() == "white"
    assert ours.get_color() == "tab:red" and v1.get_color() == "tab:blue"
    assert rb.plot_effects(table.assign(complete=False), "ours") is None


def untested_table() -> pd.DataFrame:
    """Complete variants of a reduced profile evaluated 5 times: claim X untested under all three
    for one reason; Y holds under the reading, is untested under v2 and lost its cells to diverged
    runs under v3; Z untested under every variant, for two reasons."""
    sparse, rising = "evaluated 5 times, fewer than 10", "b in 2 cells still rising"
    untested, nan = "untested at this scale", float("nan")
    rows = [("ours", "X", untested, 0, 0, sparse), ("v2", "X", untested, 0, 0, sparse), ("v3", "X", untested, 0, 6, sparse),
            ("ours", "Y", "holds", 3, 0, ""), ("v2", "Y", untested, 0, 0, rising), ("v3", "Y", "not judged", 0, 6, ""),
            ("ours", "Z", untested, 0, 0, sparse), ("v2", "Z", untested, 0, 0, rising), ("v3", "Z", untested, 0, 6, sparse)]
    table = pd.DataFrame(rows, columns=["variant", "claim", "verdict", "of cells", "diverged", "reason"])
    return table.assign(effect=[nan, nan, nan, 1.0, nan, nan, nan, nan, nan], complete=True, **{"holds in": table["of cells"]})


def test_the_robustness_text_gives_the_gates_reason_once_and_divergence_only_where_runs_diverged():
    """FedUA's and FedGMKD's robustness cells read "not judged under V, where 0 runs diverged" for
    every variant: the gate, not divergence, had left them without a cell."""
    texts = rb.claim_texts(untested_table(), planned=3)
    assert texts["X"] == "untested at this scale under all 3 variants: evaluated 5 times, fewer than 10 (3 of 3 variants run)"
    assert texts["Y"] == ("holds in 1 of 2 variants that bear on it; untested at this scale under v2: b in 2 cells "
                          "still rising (3 of 3 variants run; not judged under v3, where 6 runs diverged)")
    assert texts["Z"] == ("untested at this scale under ours, v3: evaluated 5 times, fewer than 10; "
                          "under v2: b in 2 cells still rising (3 of 3 variants run)")
    assert not any("0 runs diverged" in text for text in texts)
    # a third reason: the variants are counted, the reasons left to the chapter's table
    third = untested_table().assign(reason=lambda t: t.reason.where(t.variant != "v3", "c in 1 cell still rising"))
    assert rb.claim_texts(third, planned=3)["Z"] == (
        "untested at this scale under all 3 variants (the gate left every cell out, for 3 reasons: "
        "the chapter's robustness table gives each) (3 of 3 variants run)")
    # one reason but more than three variants to name: counted too
    rows = pd.DataFrame({"variant": list("abcde"), "claim": "W", "verdict": ["holds", *["untested at this scale"] * 4],
                         "of cells": [3, 0, 0, 0, 0], "diverged": 0, "reason": ["", *["b in 1 cell still rising"] * 4],
                         "effect": [1.0, *[float("nan")] * 4], "complete": True, "holds in": [3, 0, 0, 0, 0]})
    assert rb.claim_texts(rows, planned=5)["W"] == (
        "holds in 1 of 5 variants that bear on it; untested at this scale under 4 variants (the gate left every "
        "cell out, for 1 reason: the chapter's robustness table gives it) (5 of 5 variants run)")
    # a variant whose reason was not recorded is not a second reason, and the one given is "recorded"
    unrecorded = rows.assign(reason=["", "", *["b in 1 cell still rising"] * 3])
    assert rb.claim_texts(unrecorded, planned=5)["W"] == (
        "holds in 1 of 5 variants that bear on it; untested at this scale under 4 variants (the gate left every "
        "cell out, for 1 recorded reason: the chapter's robustness table gives it) (5 of 5 variants run)")
    silent = rows.assign(reason="")
    assert rb.claim_texts(silent, planned=5)["W"].startswith(
        "holds in 1 of 5 variants that bear on it; untested at this scale under 4 variants (the gate left every "
        "cell out, the chapter's robustness table says why)")


def test_the_robustness_text_of_judged_variants_and_diverged_runs():
    """The ledger's texts for judged variants and diverged runs, unchanged."""
    table = pd.DataFrame({
        "variant": ["reading", "reading", "sgd", "sgd", "threshold", "half-run", "literal KL", "literal KL"],
        "claim": ["A > B", "L ≥ all", "A > B", "L ≥ all", "A > B", "A > B", "A > B", "L ≥ all"],
        "verdict": ["holds", "inconclusive", "holds", "holds", "partly", "holds", "not judged", "holds"],
        "holds in": [3, 1, 3, 3, 2, 0, 0, 0], "of cells": [3, 3, 3, 3, 3, 1, 0, 1], "diverged": [0, 0, 0, 0, 0, 1, 6, 6],
        "complete": [True, True, True, True, True, False, True, True]})
    texts = rb.claim_texts(table, planned=5)
    assert texts["A > B"] == ("holds in 2, partly in 1 of 3 variants that bear on it "
                              "(4 of 5 variants run; not judged under literal KL, where 6 runs diverged)")
    assert texts["L ≥ all"] == "holds in 2, inconclusive in 1 of 3 variants that bear on it (4 of 5 variants run)"
    assert rb.claim_texts(table.iloc[:0], planned=5).empty


def test_a_variant_summary_carries_the_gates_reason():
    from fedkd_core import verdicts as V

    observations = pd.DataFrame({"alpha": [0.1] * 4, "method": ["A", "B"] * 2, "final": [0.6, 0.5] * 2,
                                 "evaluations": [5] * 4, "late_gain": [0.2] * 4})
    effects = pd.DataFrame({"alpha": [0.1, 0.1], "seed": [0, 1], "A > B": [0.10, 0.11]})
    summary = rb.summarise_effects(effects, ["alpha"], gates={"A > B": V.gate(observations, ["alpha"])}).iloc[0]
    assert (summary.verdict, summary.reason, summary["of cells"]) == (V.UNTESTED, "evaluated 5 times, fewer than 10", 0)
    assert rb.summarise_effects(effects, ["alpha"]).iloc[0].reason == ""


def test_a_grid_at_the_papers_round_budget_counts_its_still_rising_cells_and_says_so():
    """With the gate off (a grid at the paper's own T), a cell still rising is counted, not left
    out, and the variant's row names it; the reader table reads "holds; counted: A in 1 cell still rising"."""
    from fedkd_core import verdicts as V

    observations = pd.DataFrame({"alpha": [0.1] * 6, "method": ["A", "B"] * 3, "final": [0.6, 0.5] * 3,
                                 "evaluations": [50] * 6, "late_gain": [3.0, 0.0] * 3})
    effects = pd.DataFrame({"alpha": [0.1] * 3, "seed": [0, 1, 2], "A > B": [0.10, 0.11, 0.12]})
    gates = {"A > B": V.gate(observations, ["alpha"])}
    gated = rb.summarise_effects(effects, ["alpha"], gates=gates).iloc[0]
    assert gated.verdict == V.UNTESTED and gated["of cells"] == 0 and gated.reason == "A in 1 cell still rising"
    counted = rb.summarise_effects(effects, ["alpha"], gates=gates, enforce_gate=False).iloc[0]
    assert counted.verdict == "holds on this cell" and counted["of cells"] == 1
    assert counted.reason == rb.COUNTED_PREFIX + "A in 1 cell still rising"
    row = pd.DataFrame([{**counted.to_dict(), "variant": "base", "runs": 6, "diverged": 0, "complete": True, "machines": 1}])
    assert rb.reader_table(row).verdict.tolist() == ["holds on this cell; counted: A in 1 cell still rising"]


def test_fedgmkds_robustness_moves_to_50_rounds_only_after_its_verdicts_and_once_its_grid_is_finished(monkeypatch):
    """The 15-round grid under the gate until the verdicts rest on the 50-round rerun and every run
    of the 50-round grid is finished; then that grid, judged as the verdicts are (gate off)."""
    from fedkd_core import results
    from fedkd_core.chapters.fedgmkd import claims
    from fedkd_core.chapters.ledger import VerdictBasis

    planned = rb.experiments(fedgmkd, fedgmkd.ROBUSTNESS_RERUN)
    on = {"verdicts": fedgmkd.REDUCED_PROFILE, "finished": len(planned)}
    monkeypatch.setattr(claims, "verdict_basis", lambda root=None: VerdictBasis(on["verdicts"], [], "", True))
    from types import SimpleNamespace

    records = [SimpleNamespace(key=results.config_hash(config)) for config in planned]
    monkeypatch.setattr(results, "stored_records", lambda configs, root=None: records[:on["finished"]])
    monkeypatch.setattr(results, "stored_divergences", lambda configs, root=None: [])
    assert fedgmkd.robustness_grid() == rb.Grid(fedgmkd.ROBUSTNESS_BASE, "robustness/fedgmkd.yaml")  # verdicts at 15
    on["verdicts"] = fedgmkd.REDESIGN_PROFILE
    on["finished"] = len(planned) - 1
    assert fedgmkd.robustness_grid().base == fedgmkd.ROBUSTNESS_BASE  # one run short
    on["finished"] = len(planned)
    grid = fedgmkd.robustness_grid()
    assert (grid.base, grid.path, grid.enforce_gate, grid.rerun) == (fedgmkd.ROBUSTNESS_RERUN,
                                                                     "robustness/redesign/fedgmkd.yaml", False, True)
    assert rb.grid_of(fedgmkd) == grid and rb.grid_of(knfu).path == "robustness/knfu.yaml"


def test_fedgmkds_50_round_grid_is_the_15_round_one_at_the_papers_rounds():
    assert fedgmkd.ROBUSTNESS_RERUN == replace(fedgmkd.ROBUSTNESS_BASE, rounds=fedgmkd.PAPER_ROUNDS)


def test_a_variant_that_leaves_an_untested_claim_as_the_reading_has_it_does_not_bear_on_it(monkeypatch):
    """An untested claim has no effect (NaN): a variant with the same runs as the reading must still
    count as leaving it unchanged, though NaN is not equal to NaN."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Base:
        lr: float = 0.1

    def summary(spread: float) -> pd.DataFrame:
        return pd.DataFrame([{"claim": "X", "verdict": "untested at this scale", "effect": float("nan"), "low": float("nan"),
                              "high": float("nan"), "holds in": 0, "reversed": 0, "of cells": 0, "seed spread": spread,
                              "seeds": 2, "reason": "evaluated 5 times, fewer than 10"}])

    module = SimpleNamespace(ROBUSTNESS=(rb.Variant("ours"), rb.Variant("same runs"), rb.Variant("lr", {"lr": 0.2})),
                             experiments=lambda params: ["run"])
    monkeypatch.setattr(rb, "summarise_variant", lambda module, records, enforce_gate=True: records[0].summary)
    records = {name: [SimpleNamespace(summary=summary(spread), environment={})]
               for name, spread in (("ours", 0.4), ("same runs", 0.4), ("lr", 0.7))}
    table = rb.claim_table(module, Base(), records=records, divergences={})
    assert list(table.variant) == ["ours", "lr"]


def test_the_reader_table_folds_the_claim_table_into_six_columns_keeping_what_each_row_says():
    nan = float("nan")
    table = pd.DataFrame({"variant": ["base", "lr 1e-4"], "claim": ["A > B", "A > B"],
                          "verdict": ["holds", "untested at this scale"], "effect": [1.234, nan],
                          "low": [0.5, nan], "high": [1.9, nan], "holds in": [2, 0], "reversed": [0, 0],
                          "of cells": [3, 0], "seed spread": [0.1, nan], "seeds": [3, 3], "runs": [18, 17],
                          "diverged": [0, 1], "complete": [True, False], "machines": [1, 1],
                          "reason": ["", "a in 3 cells still rising"]})
    shown = rb.reader_table(table)
    assert len(shown.columns) == 6 and len(shown) == 2
    first, second = shown.to_dict("records")
    assert first["effect [95% interval]"] == "+1.2 [+0.5, +1.9]" and first["verdict"] == "holds"  # one precision
    assert first["cells ✓ / ✗ / judged"] == "2 / 0 / 3" and first["runs"] == "18"
    assert second["verdict"] == "untested at this scale (a in 3 cells still rising)"
    assert second["effect [95% interval]"] == "—" and second["runs"] == "17 (1 diverged, incomplete)"
    assert rb.reader_table(table.iloc[:0]).empty
    partial = table.assign(reason=["b in 1 cell still rising", ""]).iloc[:1]  # judged on the cells the gate kept
    assert rb.reader_table(partial).verdict.tolist() == ["holds; left out: b in 1 cell still rising"]
    # a method the gate names reads as the paper writes it (issue 61: "left out: pfedsd in 1 cell still rising")
    gated = table.assign(reason=["pfedsd in 1 cell, lg_fedavg in 2 cells still rising", ""]).iloc[:1]
    assert rb.reader_table(gated).verdict.tolist() == ["holds; left out: pFedSD in 1 cell, LG-FedAvg in 2 cells still rising"]
    one_seed = table.assign(low=nan, high=nan).iloc[:1]  # an effect without an interval: no "[+nan, +nan]"
    assert rb.reader_table(one_seed)["effect [95% interval]"].tolist() == ["+1.2"]
    # an effect that rounds to zero prints without a minus sign (issue 61: FedCKD's annealing row read "-0.00")
    near_zero = table.assign(effect=-0.0004, low=-0.77, high=0.77).iloc[:1]
    assert rb.reader_table(near_zero)["effect [95% interval]"].tolist() == ["0.000 [-0.77, +0.77]"]


def test_a_variant_made_on_two_machines_widens_only_where_a_cell_and_seed_pairs_runs_of_both(monkeypatch):
    """Each seed's runs on one machine (seed 0 on CPU A, seed 1 on CPU B): no effect pairs the two,
    so the interval is the plain one; one run moved to the other machine widens it."""
    from fedkd_core import numerics

    monkeypatch.setattr(numerics, "rerun_pairs", lambda: [])
    params = replace(base(), mnist_alphas="0.1", seeds=2)
    alma = {"knfu": 0.80, "fedmd": 0.75, "selective_fd": 0.78, "knfu_local": 0.79}
    runs = [fake_record(c, alma[c.algorithm] + 0.002 * c.seed) for c in knfu.experiments(params)]
    for run in runs:
        run.environment = {"precision": "fp32", "device_name": "CPU A" if run.config["seed"] == 0 else "CPU B"}
    by_seed = rb.summarise_variant(knfu, runs).set_index("claim")
    runs[0].environment = {"precision": "fp32", "device_name": "CPU B"}  # seed 0 now pairs CPU B with CPU A
    mixed = rb.summarise_variant(knfu, runs).set_index("claim")
    claim = by_seed.index[0]
    from fedkd_core.verdicts import effect_drift

    assert mixed.loc[claim, "low"] == pytest.approx(by_seed.loc[claim, "low"] - effect_drift())
    assert mixed.loc[claim, "effect"] == pytest.approx(by_seed.loc[claim, "effect"])
