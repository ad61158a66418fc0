"""A method from outside the package, compared on a chapter's cells (fedkd_core.compare)."""

import numpy as np
import pytest

from fedkd_core.chapters import knfu
from fedkd_core.compare import compare, main, method_configs
from fedkd_core.results import config_hash
from fedkd_core.verdicts import t_interval
from plugin_methods import registry  # noqa: F401 (a fixture)


# Two seeds of one KnFu cell (MNIST, Dir(0.5), |D_n| = 50, 3 clients, 2 rounds) and two of its methods.
PARAMS = {"seeds": 2, "num_clients": 3, "algorithms": "knfu,fedmd"}


def test_a_new_method_is_ranked_in_the_chapters_cells_against_its_proposed_method(registry, tmp_path, capsys,
                                                                                   monkeypatch):
    result = compare("plugin_methods:FedAvgM", "knfu", PARAMS, name="fedavgm_cmp", root=tmp_path)
    assert result.against == "knfu" and result.ran == 2 + 4 and result.stored == 0
    # the new method ran with the chapter's settings and seeds, its own defaults, under results/custom/
    params = knfu.Params(**PARAMS)
    expected = method_configs(knfu.experiments(params), "fedavgm_cmp", {})
    assert [c.seed for c in expected] == [0, 1] and all(c.algorithm_params == {} for c in expected)
    assert all((tmp_path / "custom" / "fedavgm_cmp" / f"{config_hash(c)}.json").exists() for c in expected)
    # one cell, three methods ranked by final ALMA, the paper's numbers beside its methods only
    table = result.ranking
    assert sorted(table.method) == ["fedavgm_cmp", "fedmd", "knfu"] and sorted(table["rank"]) == [1, 2, 3]
    assert table.sort_values("rank")["mean"].is_monotonic_decreasing
    paper = knfu.paper_table1().query("alpha == 0.5 and size == 50").set_index("algorithm")["mean"]
    assert table.set_index("method")["paper mean"].to_dict() == pytest.approx(
        {"knfu": paper["knfu"], "fedmd": paper["fedmd"], "fedavgm_cmp": np.nan}, nan_ok=True)
    # the effect is the paired per-seed difference from the runs themselves, with its t-interval
    runs = result.observations.pivot_table(index="seed", columns="algorithm", values="final")
    by_hand = t_interval(100 * (runs["fedavgm_cmp"] - runs["knfu"]).to_numpy())
    effect = result.effects.iloc[0]
    assert (effect.effect, effect.low, effect.high) == pytest.approx((by_hand.mean, by_hand.low, by_hand.high))
    assert result.verdict.interval.mean == pytest.approx(by_hand.mean) and result.verdict.cells == 1
    # asked again with --reuse: nothing runs, every run comes from the records just made
    again = compare("plugin_methods:FedAvgM", "knfu", PARAMS, name="fedavgm_cmp", root=tmp_path, reuse=True)
    assert (again.ran, again.stored) == (0, 4) and again.ranking.equals(result.ranking)
    # the chapter's runs stored as made on a machine not shown to compute alike: the interval widens
    import json

    from fedkd_core.verdicts import effect_drift
    for path in (tmp_path / "custom" / "knfu").glob("*.json"):  # knfu made elsewhere, fedavgm_cmp here
        stored = json.loads(path.read_text())
        stored["environment"]["device_name"] = "Another CPU (family 1 model 1, AVX2)"
        path.write_text(json.dumps(stored))
    elsewhere = compare("plugin_methods:FedAvgM", "knfu", PARAMS, name="fedavgm_cmp", root=tmp_path, reuse=True)
    assert elsewhere.verdict.interval.mean == pytest.approx(result.verdict.interval.mean)
    assert elsewhere.verdict.interval.low == pytest.approx(result.verdict.interval.low - effect_drift())
    assert "machines that round differently" in elsewhere.verdict.note
    # the command prints the same tables
    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path))
    main(["plugin_methods:FedAvgM", "--chapter", "knfu", "--name", "fedavgm_cmp", "--reuse", "--against", "fedmd",
          *[arg for key, value in PARAMS.items() for arg in ("-p", key, str(value))]])
    printed = capsys.readouterr().out
    assert "dataset = mnist, alpha = 0.5, size = 50" in printed and "fedavgm_cmp > fedmd" in printed
    assert f"{paper['knfu']:.1f} ± " in printed


def test_the_chapters_runs_come_from_stored_records_of_the_same_run(registry, tmp_path):
    from fedkd_core.results import run_experiment

    configs = knfu.experiments(knfu.Params(**PARAMS))
    for config in configs:  # as committed records would be
        run_experiment(config, root=tmp_path, profile="reduced", progress=False)
    result = compare("plugin_methods:FedAvgM", "knfu", PARAMS, name="fedavgm_cmp", root=tmp_path)
    assert (result.stored, result.ran) == (4, 2)
    assert not (tmp_path / "custom" / "knfu").exists()


@pytest.mark.parametrize("chapter, params, message", [
    ("setting", None, "chapter 'setting' cannot rank methods: it has no observations"),
    ("fedckd", None, "needs transfer_set .* which 1 of the 1 runs lack"),
    ("knfu", {"alpha": 0.5}, "unknown parameter\\(s\\) 'alpha'"),
])
def test_what_a_chapter_cannot_offer_is_a_clear_error(registry, tmp_path, chapter, params, message):
    with pytest.raises(ValueError, match=message):
        compare("plugin_methods:NeedsTransfer", chapter, params, root=tmp_path)
    assert not (tmp_path / "custom").exists()  # nothing ran


def test_against_must_be_one_of_the_chapters_methods(registry, tmp_path):
    with pytest.raises(ValueError, match="against must be one of the knfu chapter's methods that ran, \\['knfu'\\]"):
        compare("plugin_methods:FedAvgM", "knfu", {"algorithms": "knfu", "num_clients": 3}, name="fedavgm_cmp",
                against="fedmd", root=tmp_path)


def test_a_method_named_as_module_class_that_is_not_there_is_a_clear_error(registry, tmp_path):
    with pytest.raises(ValueError, match="module 'plugin_methods' has no 'FedAvgN'"):
        compare("plugin_methods:FedAvgN", "knfu", root=tmp_path)
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        compare("no_such_module:FedAvgM", "knfu", root=tmp_path)
