"""The book's table formatter and the paper's layout of a comparison."""

import numpy as np
import pandas as pd

from fedkd_core import report, tables


def comparison(profile="paper"):
    paper = pd.DataFrame({"alpha": [0.1] * 3 + [0.5] * 3, "method": ["FedAvg", "A", "B"] * 2,
                          "mean": [80.0, 85.0, 82.0, 70.0, 75.0, 72.0], "std": [1.0, 0.5, np.nan, 1.0, 1.0, 1.0]})
    ours = pd.DataFrame({"alpha": [0.1] * 3, "method": ["FedAvg", "A", "B"], "mean": [50.0, 51.0, 55.0],
                         "std": [0.5, 0.2, 0.1], "n": [3, 3, 3], "profile": [profile] * 3, "rounds": ["15"] * 3})
    return report.compare_with_paper(ours, paper, ["alpha", "method"])


def test_cells_never_read_nan_and_a_missing_spread_says_so():
    assert tables.mean_spread(55.75, np.nan, 2) == "55.75 (no spread)"
    assert tables.mean_spread(np.nan, 1.0) == "—"
    assert tables.cell_text(np.nan) == "—" and tables.cell_text(-0.0) == "0.0" and tables.cell_text(1.0, 3) == "1.000"
    assert tables.cell_text(np.int64(7)) == "7" and tables.cell_text(True) == "yes"
    assert report.pm(55.75, float("nan"), 2) == "55.75 (no spread)"


def test_html_has_no_index_no_nan_and_joins_pivot_headers():
    frame = pd.DataFrame({"metric": ["local", "global"], "clients": [10, 10], "value": [0.123456, np.nan]})
    pivot = frame.pivot_table(index="clients", columns="metric", values="value", dropna=False)
    text = tables.html(pivot, digits=2, legend="a legend")
    assert "nan" not in text.lower() and "0.12" in text and "0.123456" not in text
    assert '<th><span class="fedkd-word">clients</span></th>' in text and "fedkd-legend" in text
    assert tables.html(frame.set_index("metric")).count("<th>") == 3  # the index became a column


def test_paper_scale_compares_values_and_marks_agreement():
    text = tables.paper_layout(comparison("paper"), ["method"], ["alpha"], "method")
    assert text.count("<table") == 1 and "α" not in text and "alpha 0.1" in text and "alpha 0.5" not in text
    assert "Δ −" in text or "Δ -" in text  # ours − paper shown at the paper's scale
    assert tables.DISAGREES in text and "|ours − paper| ≤ the paper's std + 2 points" in text
    assert "nan" not in text.lower()


def test_reduced_scale_compares_ranks_and_gains_over_the_baseline():
    text = tables.paper_layout(comparison("reduced"), ["method"], ["alpha"], "method", baseline="FedAvg",
                               names={"alpha": "α"})
    assert "Δ" not in text and "α 0.1" in text
    # B is #1 for us (55.0), #2 in the paper (82.0 < 85.0); its gain over FedAvg +5.0 vs the paper's +2.0
    row_b = text.split(">B</th>")[1].split("</tr>")[0]
    assert "#1" in row_b and "paper #2" in row_b and "+5.0" in row_b and "+2.0" in row_b
    assert tables.PARTLY in row_b  # another rank, same sign of the gain
    row_a = text.split(">A</th>")[1].split("</tr>")[0]
    assert "#2" in row_a and tables.PARTLY in row_a
    assert "same rank as in the paper" in text and "rank among the methods" in text


def test_a_rank_the_seeds_cannot_fix_is_a_range_consistent_with_the_papers_not_agreeing():
    paper = pd.DataFrame({"alpha": [0.1] * 3, "method": ["FedAvg", "A", "B"], "mean": [80.0, 85.0, 82.0],
                          "std": [1.0, 1.0, 1.0]})
    ours = pd.DataFrame({"alpha": [0.1] * 3, "method": ["FedAvg", "A", "B"], "mean": [50.0, 55.0, 55.4],
                         "std": [0.5, 1.0, 1.0],
                         "n": [3, 3, 3], "profile": ["reduced"] * 3, "rounds": ["15"] * 3})
    text = tables.paper_layout(report.compare_with_paper(ours, paper, ["alpha", "method"]), ["method"], ["alpha"], "method")
    row_a = text.split(">A</th>")[1].split("</tr>")[0]
    row_b = text.split(">B</th>")[1].split("</tr>")[0]
    # A and B differ by 0.4 < t(0.975, 2)·sqrt(1/2 + 1/2) = 4.30: each could be #1 or #2; FedAvg,
    # 5 points below A, is clearly #3
    # a range that holds the paper's rank is not contradicted, but it is not shown as agreement
    assert "#1-2" in row_a and "#1-2" in row_b and tables.CONSISTENT in row_a and tables.CONSISTENT in row_b
    assert tables.AGREES not in row_a + row_b and "not contradicted, not confirmed" in text
    row_fedavg = text.split(">FedAvg</th>")[1].split("</tr>")[0]
    assert "#3 " in row_fedavg and "#3-" not in row_fedavg and tables.AGREES in row_fedavg  # fixed, the paper's
    t2 = 4.302652729911275  # scipy.stats.t.ppf(0.975, 2), the verdicts' quantile for 3 paired seeds
    assert abs(tables.noise_band(1.0, 3, 1.0, 3) - t2) < 1e-9
    # one seed has no spread and its verdict is always inconclusive: it orders nothing
    assert tables.noise_band(np.nan, 1, 1.0, 3) == np.inf and tables.noise_band(np.nan, 1, np.nan, 1) == np.inf
    assert abs(tables.noise_band(1.0, 2, 1.0, 5) - 12.706204736174696 * np.sqrt(2 / 2 + 1.25 / 5)) < 1e-9  # df 1
    clear = ours.assign(mean=[50.0, 55.0, 60.0])  # 5 points apart: exact ranks, B #1 where the paper has #2
    text = tables.paper_layout(report.compare_with_paper(clear, paper, ["alpha", "method"]), ["method"], ["alpha"],
                               "method")
    row_b = text.split(">B</th>")[1].split("</tr>")[0]
    assert "#1 " in row_b and tables.DISAGREES in row_b
    # one seed each, 5 points apart: no rank is fixed and no cell is green
    single = clear.assign(std=[np.nan] * 3, n=[1] * 3)
    text = tables.paper_layout(report.compare_with_paper(single, paper, ["alpha", "method"]), ["method"], ["alpha"],
                               "method")
    assert "#1-3" in text and tables.AGREES not in text.split("<p")[0]


def test_one_table_per_profile():
    both = pd.concat([comparison("paper"), comparison("reduced")], ignore_index=True)
    text = tables.paper_layout(both, ["method"], ["alpha"], "method", baseline="FedAvg")
    assert text.count("<table") == 2 and "profile <b>paper</b>" in text and "profile <b>reduced</b>" in text


def test_tiny_magnitudes_read_as_zero_or_scientific_not_a_row_of_zeros():
    assert tables.scientific(0.0) == "0" and tables.scientific(np.float32(2.4e-7)) == "2.4e-07"
    assert tables.scientific(0.6059) == "6.1e-01" and tables.scientific(np.nan) == "—"


def test_settings_print_exactly_and_measurements_keep_their_decimals():
    assert [tables.setting_text(v) for v in (0.99, 0.01, np.float64(0.25), 1e-5, 3.0, 7, "gmm")] == \
        ["0.99", "0.01", "0.25", "1e-05", "3", "7", "gmm"]
    parameters = pd.DataFrame({"parameter": ["gamma", "FedProx μ", "alpha", "batch size"],
                               "used": [0.99, 0.01, 0.25, 64], "accuracy": [55.75, 60.04, 61.0, 1.0]})
    text = tables.html(parameters, settings=["used"])
    assert all(f"<td>{v}</td>" in text for v in ("0.99", "0.01", "0.25", "64")), text
    assert "<td>55.8</td>" in text and "<td>60.0</td>" in text  # the measurement column: one decimal
    assert "<td>1.0</td>" in tables.html(parameters)  # without settings=, the old rounding (0.99 -> 1.0)


def test_a_pivot_header_shows_its_settings_exactly():
    cells = pd.DataFrame({"algorithm": ["fedavg"] * 3, "varied": ["alpha"] * 3, "value": [0.01, 0.1, 1.0],
                          "cell": ["1", "2", "3"]})
    text = tables.html(cells.pivot(index="algorithm", columns=["varied", "value"], values="cell"))
    assert "<th>alpha · 0.01</th>" in text and "<th>alpha · 1</th>" in text and "alpha · 0.0<" not in text


def test_rows_left_by_filtering_show_no_index_column_but_a_named_index_is_kept():
    frame = pd.DataFrame({"method": ["A", "B", "C"], "mean": [1.0, 2.0, 3.0]}, index=[0, 10, 11])
    assert ">index<" not in tables.html(frame) and tables.html(frame).count("<th>") == 2
    labelled = frame.set_index("method")
    assert '<span class="fedkd-word">method</span>' in tables.html(labelled) and ">index<" not in tables.html(labelled)


def test_headers_can_wrap_after_underscores_and_are_escaped():
    """The book wraps headers at word boundaries only, so a snake_case header needs its own
    break opportunities; the text a reader sees is unchanged."""
    text = tables.html(pd.DataFrame({"seconds_per_client_round": [1.0], "a<b": [2.0], "rerun": ["paper/knfu_x.yaml"]}))
    assert "<th>seconds_<wbr>per_<wbr>client_<wbr>round</th>" in text and '<th><span class="fedkd-word">a&lt;b</span></th>' in text
    assert "<td>paper/<wbr>knfu_<wbr>x.yaml</td>" in text


def test_a_short_one_word_header_stays_whole_and_longer_ones_may_wrap():
    """"clients" must not render as "client/s" in a narrow column; a header of several words, or
    one long word, keeps its break opportunities so that a wide table still fits."""
    text = tables.html(pd.DataFrame({"clients": [1], "final": [2.0], "gate at round 15": ["flat"],
                                     "participation_rate": [0.1]}))
    assert '<th><span class="fedkd-word">clients</span></th>' in text
    assert '<th><span class="fedkd-word">final</span></th>' in text
    assert "<th>gate at round 15</th>" in text and "<th>participation_<wbr>rate</th>" in text


def test_a_value_that_rounds_to_zero_prints_without_a_minus_sign():
    from fedkd_core.tables import cell_text

    assert cell_text(-0.04) == "0.0" and cell_text(-0.004, 2) == "0.00" and cell_text(-0.06) == "-0.1"


def test_a_signed_difference_never_prints_a_negative_zero():
    assert tables.signed(1.23) == "+1.2" and tables.signed(-0.06) == "-0.1" and tables.signed(0.004, 2) == "0.00"
    assert tables.signed(-0.04) == "0.0" and tables.signed(-0.0) == "0.0" and tables.signed(-0.004, 2) == "0.00"
    assert tables.signed(float("nan")) == "—"


def test_a_gain_over_the_baseline_that_rounds_to_zero_reads_without_a_minus_sign():
    """FedUA's Table 2 read "vs FedAvg -0.0 (paper +9.7)" (issue 61)."""
    paper = pd.DataFrame({"alpha": [0.1] * 2, "method": ["FedAvg", "A"], "mean": [80.0, 89.7], "std": [1.0, 1.0]})
    ours = pd.DataFrame({"alpha": [0.1] * 2, "method": ["FedAvg", "A"], "mean": [50.0, 49.96], "std": [0.5, 0.2],
                         "n": [3, 3], "profile": ["reduced"] * 2, "rounds": ["15"] * 2})
    text = tables.paper_layout(report.compare_with_paper(ours, paper, ["alpha", "method"]), ["method"], ["alpha"],
                               "method", baseline="FedAvg")
    assert "vs FedAvg 0.0 (paper +9.7)" in text and "-0.0" not in text


def test_every_table_sits_in_a_box_that_scrolls_when_it_is_wider_than_the_column():
    import pandas as pd

    from fedkd_core.tables import html

    page = html(pd.DataFrame({"a": [1.0]}))
    assert page.startswith('<div class="fedkd-scroll"><table class="fedkd-table">') and "</table></div>" in page
