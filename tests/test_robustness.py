"""Robustness grids: variants as data around a base profile, shared runs reused, claims counted
per variant from per-(cell, seed) effects."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from fedkd_core.chapters import fedckd, knfu
from fedkd_core.chapters import robustness as rb
from fedkd_core.results import config_hash
from fedkd_core.sweep import load_grid

ROOT = Path(__file__).resolve().parents[1]
BASE_FILE = ROOT / "notebooks" / "params" / "robustness" / "knfu.yaml"


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
    assert params.profile == "robustness" and configs == rb.experiments(knfu, params)
    with pytest.raises(SystemExit, match="no robustness variants"):
        load_grid("fedua", ROOT / "notebooks" / "params" / "reduced" / "fedua.yaml", robustness=True)


def test_summarised_effects_count_cells_by_their_seed_mean():
    effects = pd.DataFrame({"alpha": [0.1, 0.1, 0.5, 0.5], "seed": [0, 1, 0, 1],
                            "A > B": [0.02, -0.01, -0.03, 0.01], "C > D": [0.01, 0.01, None, None]})
    table = rb.summarise_effects(effects, ["alpha"]).set_index("claim")
    assert tuple(table.loc["A > B", ["holds in", "of cells"]]) == (1, 2)  # 0.005 > 0, -0.01 < 0
    assert table.loc["A > B", "effect"] == pytest.approx(-0.25)
    assert table.loc["A > B", "seed spread"] == pytest.approx(50 * abs(-0.005 - 0.0))  # per-seed means -0.005, 0.0
    assert tuple(table.loc["C > D", ["holds in", "of cells", "seeds"]]) == (1, 1, 2)


def test_variant_counts_use_complete_variants_only():
    table = pd.DataFrame({"variant": ["a", "b", "c"], "claim": ["X"] * 3, "holds in": [3, 2, 3], "of cells": [3, 3, 3],
                          "effect": [1.0, 0.5, 2.0], "seed spread": [0.1] * 3, "seeds": [3] * 3, "runs": [36] * 3,
                          "complete": [True, True, False]})
    counts = rb.variant_counts(table).set_index("claim")
    assert tuple(counts.loc["X"]) == (1, 2)


def fake_record(config, alma: float) -> SimpleNamespace:
    stored = json.loads(json.dumps(config.resolved()))
    return SimpleNamespace(config=stored, final={"alma": alma, "client_acc_std": 0.0}, history=[{"alma": alma}],
                           client_accuracies=[], profile="robustness", environment={"precision": "fp32"})


def test_knfu_claim_effects_are_differences_of_alma_per_cell_and_seed():
    params = replace(base(), mnist_alphas="0.1", seeds=1)
    alma = {"knfu": 0.80, "fedmd": 0.75, "selective_fd": 0.78, "knfu_local": 0.79}
    records = [fake_record(c, alma[c.algorithm]) for c in knfu.experiments(params)]
    effects = knfu.claim_effects(records).iloc[0]
    assert effects["KnFu > FedMD"] == pytest.approx(0.05)
    assert effects["KnFu > Selective-FD"] == pytest.approx(0.02)
    assert effects["Local ≥ every sharing method"] == pytest.approx(-0.01)


@pytest.mark.parametrize("profile, constant", [("reduced", "REDUCED_PROFILE"), ("robustness", "ROBUSTNESS_BASE")])
def test_fedckd_yamls_are_the_chapters_profiles(profile, constant):
    path = ROOT / "notebooks" / "params" / profile / "fedckd.yaml"
    assert fedckd.Params(**yaml.safe_load(path.read_text())) == getattr(fedckd, constant)


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
    assert effects["annealing helps (γ < 1 > γ = 1)"] == pytest.approx(-0.01)
