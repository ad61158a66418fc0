"""The claims ledger: verdicts computed from claim counts, every chapter present, links that
point at the chapters, text that survives HTML."""

from pathlib import Path

import pandas as pd

from fedkd_core.chapters import fedckd, ledger

ROOT = Path(__file__).resolve().parents[1]


def counts(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["claim", "holds in", "of cells"])


def test_claim_rows_judge_from_our_counts_and_mark_what_is_missing():
    paper = counts([("A > B", 3, 3), ("C > D", 2, 2), ("E > F", 1, 1)])
    ours = counts([("A > B", 3, 3), ("C > D", 1, 2), ("E > F", 0, 4)])
    rows = ledger.claim_rows("X", "x.html#verdict", paper, ours, "profile reduced: 3 runs").set_index("claim")
    assert list(rows.verdict) == ["holds", "partly", "does not hold"]
    assert rows.loc["C > D", "ours"] == "1 of 2 cells" and rows.loc["C > D", "paper's tables"] == "2 of 2 cells"
    missing = ledger.claim_rows("X", "x.html", paper, None, "")
    assert set(missing.verdict) == {ledger.NO_RECORDS} and set(missing.ours) == {"—"}
    # a claim we count on zero cells is not judged
    empty = ledger.claim_rows("X", "x.html", paper.head(1), counts([("A > B", 0, 0)]), "profile quick")
    assert empty.verdict.iloc[0] == ledger.NO_RECORDS


def test_fedckd_claims_on_hand_made_means_and_on_the_papers_tables():
    means = pd.DataFrame({"dataset": ["d"] * 4 + ["e"] * 4, "setting": ["practical"] * 8, "clients": [20] * 8,
                          "algorithm": ["fedavg", "fedprox", "pfedsd", "fedckd"] * 2,
                          "mean": [50, 51, 70, 71, 50, 52, 72, 51.5]})
    table = fedckd.claims(means).set_index("claim")
    assert tuple(table.loc["FedCKD > pFedSD"]) == (1, 2)
    assert tuple(table.loc["FedCKD best of the methods run"]) == (1, 2)
    assert tuple(table.loc["every personalised method beats FedAvg and FedProx"]) == (1, 2)
    paper = fedckd.claims(fedckd.paper_accuracy_tables()).set_index("claim")
    assert tuple(paper.loc["FedCKD > pFedSD"]) == (12, 12)  # Tables I-II: FedCKD above pFedSD everywhere



def test_fedckd_annealing_claim_compares_each_cell_with_and_without_annealing():
    means = pd.DataFrame({"dataset": ["d", "d", "e", "e", "f"], "setting": ["practical"] * 5, "clients": [20] * 5,
                          "annealing": [True, False, True, False, True], "mean": [71.0, 70.5, 60.0, 60.0, 55.0]})
    table = fedckd.annealing_claims(means).set_index("claim")  # f has no constant-λ run: not a cell
    assert tuple(table.loc[fedckd.ANNEALING_CLAIM]) == (1, 2)  # a tie is not a gain
    paper = fedckd.annealing_claims(fedckd.paper_table4().assign(setting="practical", clients=20))
    assert tuple(paper.set_index("claim").loc[fedckd.ANNEALING_CLAIM]) == (1, 1)  # 57.25 > 57.08
    assert fedckd.annealing_claims(means[means.annealing]).empty


def test_fedckd_annealing_records_are_the_cells_where_both_gammas_ran():
    from types import SimpleNamespace

    def record(gamma, partition="dirichlet", seed=0):
        return SimpleNamespace(config={"algorithm": "fedckd", "algorithm_params": {"gamma": gamma}, "seed": seed,
                                       "participation": 1.0, "model": "pfedsd_cnn_mnist",
                                       "data": {"dataset": "fashion_mnist", "partition": partition, "num_clients": 20,
                                                "alpha": 0.1}})

    pair = [record(0.99), record(1.0), record(0.99, seed=1)]
    alone = [record(0.99, partition="pathological")]
    other = [SimpleNamespace(config={"algorithm": "pfedsd", "algorithm_params": {}, "data": {}})]
    assert fedckd.annealing_records(pair + alone + other) == pair


def test_the_ledger_has_every_chapter_and_links_to_existing_pages():
    table = ledger.ledger()
    assert list(dict.fromkeys(table.chapter)) == ["KnFu", "FedCKD", "FedUA", "FedGMKD"]
    verdicts = {"holds", "partly", "does not hold", ledger.NO_RECORDS, ledger.UNTESTABLE}
    assert set(table.verdict) <= verdicts
    for section in table.section:
        page, anchor = section.split("#")
        assert (ROOT / "notebooks" / page.replace(".html", ".py")).exists(), section
        assert anchor
    judged = table[table.verdict.isin(["holds", "partly", "does not hold"])]
    assert all(text.startswith("profile ") for text in judged.evidence)


def test_linked_table_escapes_the_claims_text():
    table = ledger.claim_rows("X", "x.html#v", counts([("Local ≥ sharing at largest |D_n| <", 1, 1)]), None, "")
    html = ledger.linked_table(table)
    assert '<a href="./x.html#v">Local ≥ sharing at largest |D_n| &lt;</a>' in html
    assert html.count("<td>") == 6  # one row of six cells: the '|' did not split anything


def test_evidence_counts_seeds_per_cell_and_lists_the_rounds():
    from dataclasses import replace
    from types import SimpleNamespace

    params = replace(fedckd.REDUCED_PROFILE, settings="practical", algorithms="fedavg,fedckd", seeds=3,
                     annealing_datasets="")
    configs = fedckd.experiments(params)
    records = [SimpleNamespace(config=c.resolved(), profile="reduced") for c in configs
               if c.algorithm == "fedavg" or c.seed == 0]
    records.append(SimpleNamespace(config=replace(configs[0], rounds=5).resolved(), profile="quick"))
    assert ledger.evidence(records) == ("profile quick: 1 runs, 1 seed(s) per cell, 5 rounds; "
                                        "profile reduced: 4 runs, 1-3 seed(s) per cell, 15 rounds")
    assert ledger.evidence([]) == ledger.NO_RECORDS


def test_the_robustness_text_counts_complete_variants_that_bear_on_each_claim():
    table = pd.DataFrame({
        "variant": ["reading", "reading", "sgd", "sgd", "threshold", "half-run"],
        "claim": ["A > B", "L ≥ all", "A > B", "L ≥ all", "A > B", "A > B"],
        "holds in": [3, 1, 3, 3, 2, 0], "of cells": [3, 3, 3, 3, 3, 1],
        "complete": [True, True, True, True, True, False]})
    texts = ledger.robustness_texts(table, planned=5)
    assert texts["A > B"] == "holds in 2 of 3 variants that bear on it (3 of 5 variants run)"
    assert texts["L ≥ all"] == "holds in 1 of 2 variants that bear on it (3 of 5 variants run)"
    assert ledger.robustness_texts(table.iloc[:0], planned=5).empty


def test_the_robustness_text_names_variants_whose_diverged_runs_left_a_claim_unjudged():
    table = pd.DataFrame({  # robustness.claim_table gives a claim a variant could not judge 0 cells
        "variant": ["reading", "reading", "literal KL", "literal KL", "half-run"],
        "claim": ["A > B", "C", "A > B", "C", "A > B"],
        "holds in": [2, 1, 0, 0, 0], "of cells": [2, 1, 0, 1, 1], "diverged": [0, 0, 6, 6, 1],
        "complete": [True, True, True, True, False]})
    texts = ledger.robustness_texts(table, planned=3)
    assert texts["A > B"] == ("holds in 1 of 1 variants that bear on it "
                              "(2 of 3 variants run; not judged under literal KL, where 6 runs diverged)")
    assert texts["C"] == "holds in 1 of 2 variants that bear on it (2 of 3 variants run)"  # judged on what finished
