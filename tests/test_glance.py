"""The landing page's results at a glance: the ledger's claims and verdicts, never typed."""

import pandas as pd

from fedkd_core import glance
from fedkd_core.chapters import ledger


def test_the_landing_page_is_the_ledger_with_the_same_claims_and_verdicts(empty_ledger):
    table = empty_ledger  # ledger.ledger(): tests keep records in an empty throw-away folder
    page = glance.glance_table(table)
    assert list(page.columns) == glance.COLUMNS
    assert len(page) == len(table) and list(page.paper.unique()) == ["KnFu", "FedCKD", "FedUA", "FedGMKD"]
    assert [v.strip("*") for v in page["our verdict"]] == list(table.verdict)
    from html import escape

    assert all(glance._escape(escape(claim)) in link for claim, link in zip(table.claim, page.claim))
    assert set(table.verdict) <= {ledger.NO_RECORDS, ledger.UNTESTABLE}  # no records here: none judged


def test_a_claim_with_a_bar_does_not_split_the_markdown_row():
    row = ledger.untestable("X", "Local ≥ sharing at |D_n| max", "no data", "x.html#v")
    text = glance.markdown(glance.glance_table(row))
    body = text.splitlines()[2]
    assert body.count(" | ") == len(glance.COLUMNS) - 1 and '<a href="chapters/x.html#v">' in body


def test_the_scale_column_is_short_and_a_line_below_says_what_each_scale_is(empty_ledger):
    table = empty_ledger
    page = glance.glance_table(table)
    assert all(":" not in scale for scale in page.scale)
    fake = table.head(2).assign(chapter=["A", "B"], scale=["paper: 20 clients", "reduced: 10 rounds"])
    assert glance.scales_text(fake) == ("**Scales.** What the scale column stands for, one line per distinct scale "
                                        "of a paper:\n\n- **A**, paper: 20 clients\n- **B**, reduced: 10 rounds\n")
    # a paper whose verdicts rest on several record sets numbers them, in the column and the list
    three = table.head(3).assign(chapter=["A", "A", "A"], scale=["paper: MNIST tuned", "paper: CIFAR as coded",
                                                                 "paper: MNIST tuned"])
    assert list(glance.glance_table(three).scale) == ["paper (1)", "paper (2)", "paper (1)"]
    assert "- **A** (1), paper: MNIST tuned\n- **A** (2), paper: CIFAR as coded\n" in glance.scales_text(three)


def test_a_verdict_the_gate_would_read_otherwise_is_flagged_on_the_landing_page():
    """At the paper's own round budget a still-rising cell counts; where leaving such cells out
    changes the verdict, the landing page says so beside it, not only the Claims page's note."""
    row = ledger.untestable("X", "A > B", "", "x.html#v").assign(
        verdict="holds", note="2 of 4 cells still rising at the last round, counted: b; "
                              "with the still-rising cells left out: untested at this scale")
    verdict = glance.glance_table(row)["our verdict"].iloc[0]
    assert verdict == "**holds** ⚑ with the still-rising cells left out: untested at this scale"
    assert glance.glance_table(row.assign(note="2 seeds"))["our verdict"].iloc[0] == "**holds**"


def test_the_landing_page_gives_the_best_round_no_word_and_says_when_one_cell_decides():
    """The best round is a diagnostic without a word (issue 59): even an old row whose best round
    read otherwise gets no flag beside the verdict."""
    assert not hasattr(glance, "best_round_flag")
    row = ledger.untestable("X", "A > B", "", "x.html#v").assign(
        verdict="inconclusive", effect="+0.10 [-0.30, +0.49]", cells="0 hold, 0 reversed, 1 inconclusive of 1",
        **{"best round": "diagnostic, no verdict: -0.8 [-1.0, -0.6]"})
    page = glance.glance_table(row).iloc[0]
    assert page["our verdict"] == "**inconclusive**"
    assert page["effect (points) [95% interval]"] == "+0.10 [-0.30, +0.49] (1 cell)"
    same = glance.glance_table(row.assign(cells="1 hold, 0 reversed, 0 inconclusive of 11",
                                          **{"best round": "inconclusive, +0.2 [-0.1, +0.5]"})).iloc[0]
    assert same["our verdict"] == "**inconclusive**" and same["effect (points) [95% interval]"] == "+0.10 [-0.30, +0.49]"


def test_the_landing_page_gives_each_paper_its_own_table_under_a_count_of_its_verdicts(empty_ledger):
    table = empty_ledger
    two = table.head(3).assign(chapter=["A", "A", "B"], verdict=["holds", "inconclusive", "holds"]).drop(
        columns=ledger.HOLM_COLUMN)
    text = glance.by_paper(glance.glance_table(two), two)
    headers = [line for line in text.splitlines() if line.startswith("| claim |")]
    assert len(headers) == 2 and all("| paper |" not in line for line in headers)
    assert "**A**: 2 claims: 1 holds, 1 inconclusive." in text and "**B**: 1 claim: 1 holds." in text
    assert text.index("**A**") < text.index("**B**")
    assert glance.count_line(table.verdict).startswith(f"{len(table)} claims: ")
    import pandas as pd

    words = pd.Series(["inconclusive", "does not hold", "holds", "does not hold"])  # one order for every paper
    assert glance.count_line(words) == "4 claims: 1 holds, 2 do not hold, 1 inconclusive"


def test_the_landing_page_marks_a_verdict_holms_correction_does_not_keep_and_counts_them_per_paper():
    rows = pd.concat([ledger.untestable("A", f"claim {i}", "", "x.html#v") for i in range(3)], ignore_index=True)
    rows = ledger.with_holm(rows.assign(verdict=["holds", "holds", "inconclusive"], p=[0.001, 0.04, 0.5]))
    page = glance.glance_table(rows)["our verdict"].tolist()
    # 0.04 > 0.05 / 2 after 0.001 passed 0.05 / 3: the word a reader sees is "inconclusive after correction"
    assert page == ["**holds**", "**inconclusive after correction** ‡", "**inconclusive**"]
    text = glance.by_paper(glance.glance_table(rows), rows)
    assert ("**A**: 3 claims: 1 holds, 1 inconclusive, 1 inconclusive after correction; 1 of 2 decided verdicts "
            "survive Holm's correction over the 3 claims judged (‡ marks the others).") in text


def test_a_paper_whose_scale_leaves_out_what_its_claims_are_about_is_read_with_a_warning_under_its_table(empty_ledger):
    """FedUA's reduced server distils for 1 epoch where the paper's distils for 20, and its weights
    are our reconstruction: the landing page says so under FedUA's verdicts, not only in the chapter."""
    from dataclasses import replace

    from fedkd_core.chapters import fedua
    from fedkd_core.chapters.fedua.profiles import PAPER_PROFILE
    from fedkd_core.report import count_text

    warnings = glance.scale_warnings()
    assert set(warnings) == {fedua.CHAPTER}
    text = warnings[fedua.CHAPTER]
    assert (f"gives {count_text(fedua.REDUCED_PROFILE.server_epochs, 'epoch')} per round where the paper gives "
            f"{PAPER_PROFILE.server_epochs}") in text
    assert "near one-hot" in text
    # FedDF − FedAvg in the paper's Table 2 (72.3 − 62.6, 64.4 − 59.6, 82.8 − 80.1), beside ours from the
    # committed records (the tests' own results folder is empty: the sentence needs records)
    from pathlib import Path

    assert "where the paper's moves it" not in text
    committed = fedua.read_at_scale(root=Path(__file__).resolve().parents[1] / "results")
    assert "(step, dir0.1, dir0.5), where the paper's moves it by +9.7, +4.8, +2.7." in committed
    assert fedua.read_at_scale(replace(fedua.REDUCED_PROFILE, server_epochs=PAPER_PROFILE.server_epochs)) == ""  # the paper's budget: nothing to warn
    table = empty_ledger
    two = table.head(3).assign(chapter=["A", "A", "B"]).drop(columns=ledger.HOLM_COLUMN)
    page = glance.by_paper(glance.glance_table(two), two, {"A": "A's server trains for one epoch."})
    a_table, b_line = page.index("| claim |"), page.index("**B**")
    warning = page.index(glance.READ_AT_SCALE + "A's server trains for one epoch.")
    assert a_table < warning < b_line and page.count(glance.READ_AT_SCALE) == 1


def test_a_decided_verdict_under_a_point_is_flagged_small_on_the_landing_page_and_the_claims_page():
    from fedkd_core import verdicts as V

    tight = V.Verdict("A > B", V.HOLDS, V.Interval(0.34, 0.18, 0.51), cells=4, holding=2, seeds="3")
    wide = replace_interval(tight, V.Interval(0.9, 0.5, 1.2))  # its upper bound passes a point
    note = ledger.note_text(tight)
    assert ledger.SMALL_NOTE in note and ledger.SMALL_NOTE not in ledger.note_text(wide)
    row = ledger.untestable("X", "A > B", "", "x.html#v").assign(verdict="holds", note=note)
    assert glance.glance_table(row)["our verdict"].iloc[0] == "**holds** (small)"
    assert ledger.verdict_html(row.iloc[0]).endswith("holds</span></b> (small)")
    # a word a chapter withheld is not flagged, though the measured note stays
    withheld = row.assign(verdict=V.UNEQUAL_TUNING)
    assert "(small)" not in glance.glance_table(withheld)["our verdict"].iloc[0]


def replace_interval(verdict, interval):
    from dataclasses import replace

    return replace(verdict, interval=interval)


def test_the_best_round_is_a_diagnostic_the_landing_page_gives_no_word():
    """Issue 59: the best round is shown as a diagnostic (its effect, no word), folded in a claim's
    details, never beside the verdict."""
    from fedkd_core import verdicts as V

    final = V.Verdict("A > B", V.INCONCLUSIVE, V.Interval(0.06, -0.06, 0.18), cells=1, seeds="3")
    best = V.Verdict("A > B", V.HOLDS, V.Interval(0.047, 0.003, 0.092), cells=1, holding=1, seeds="3")
    text = ledger.best_round_text(final, best)
    assert text.startswith("diagnostic, no verdict: +0.047 [+0.003, +0.092]")
    row = ledger.untestable("X", "A > B", "", "x.html#v").assign(verdict="inconclusive", **{"best round": text})
    assert glance.glance_table(row)["our verdict"].iloc[0] == "**inconclusive**"
    html = ledger.verdict_rows_html(row, lambda r: "x.html")
    assert "best round (a diagnostic, no word): +0.05 [+0.003, +0.09]" in html.split("<details", 1)[1]


def test_effects_print_at_one_precision():
    assert ledger.one_precision("+0.3383 [+0.0001, +0.6765]") == "+0.34 [+0.000, +0.68]"
    assert ledger.one_precision("+1.03 [-0.03, +2.08]") == "+1.0 [-0.03, +2.1]"  # a bound is never printed "-0.0"
    assert ledger.one_precision("-0.00 [-0.77, +0.77]") == "0.00 [-0.77, +0.77]"
    assert ledger.one_precision("+4.81 [+3.94, +5.7]") == "+4.8 [+3.9, +5.7]"
    assert ledger.one_precision("+0.40 [-0.20, +1.10]") == "+0.4 [-0.2, +1.1]"  # two only where all are under a point
    assert ledger.one_precision("—") == "—"


def test_claims_read_as_plain_sentences():
    assert ledger.plain_claim("KnFu > FedMD (MNIST, schedules tuned)") == "KnFu beats FedMD (MNIST, schedules tuned)"
    assert ledger.plain_claim("FedUA > FedDF > FedAvg") == "FedUA beats FedDF, which beats FedAvg"
    assert ledger.plain_claim("Local ≥ every sharing method") == "Local does at least as well as every sharing method"
    assert ledger.plain_claim("annealing helps (γ < 1 > γ = 1)") == "annealing helps (γ < 1 > γ = 1)"


def _judged_row(**values):
    row = ledger.untestable("KnFu", "KnFu > FedMD (MNIST, schedules tuned)", "", "knfu.html#v").assign(
        verdict="holds", effect="+0.3383 [+0.1001, +0.6765]", paper="holds, +3.1 [+2.0, +4.2]",
        cells="1 hold, 0 reversed, 9 inconclusive of 10", scale="paper: MNIST", evidence="profile paper: 144 runs",
        note="2 of 12 cells left out", p=0.01, **{"best round": "diagnostic, no verdict: +0.28 [-0.04, +0.60]"})
    return row.assign(**values)


def test_a_verdict_row_is_a_sentence_a_word_and_an_effect_with_the_fine_print_folded():
    import re

    html = ledger.verdict_rows_html(ledger.with_holm(_judged_row()), lambda row: "knfu.html#x")
    folded = re.search(r"<details.*?</details>", html).group(0)
    shown = html.replace(folded, "")
    assert "KnFu beats FedMD (MNIST, schedules tuned)" in shown and '<b class="fedkd-verdict">holds</b>' in shown
    assert "+0.34 [+0.10, +0.68]" in shown and "+3.1 [+2.0, +4.2]" in shown
    for fine in ("1 hold, 0 reversed", "best round (a diagnostic, no word): +0.28", "records: profile paper",
                 "2 of 12 cells left out", "what the words mean"):
        assert fine in folded and fine not in shown
    assert html.count("<details") == 1


def test_a_caveat_and_diverged_runs_stay_visible_beside_the_verdict():
    row = ledger.with_holm(_judged_row(chapter="FedUA", **{"failures left out": "holds, +0.5 [+0.1, +0.9]"}))
    html = ledger.verdict_rows_html(row, lambda r: "x.html", caveats={"FedUA": "the server distils 1 epoch"})
    shown = html.partition("<details")[0]
    assert "the server distils 1 epoch" in shown
    diverged = ledger.verdict_rows_html(row, lambda r: "x.html").partition("<details")[0]
    assert "with the diverged runs left out: holds, +0.50 [+0.10, +0.90]" in diverged


def test_the_first_screen_shows_each_papers_headline_claims():
    rows = pd.concat([_judged_row(), _judged_row(claim="KnFu > Selective-FD (MNIST, schedules tuned)"),
                      _judged_row(chapter="FedUA", claim="FedUA > FedDF > FedAvg"),
                      _judged_row(chapter="FedUA", claim="BALD > Random at equal SR")], ignore_index=True)
    picked = glance.headline_rows(rows)
    assert list(picked.claim) == ["KnFu > FedMD (MNIST, schedules tuned)", "FedUA > FedDF > FedAvg"]
    page = glance.first_screen(rows, "The lead falls.", {"FedUA": "the server distils 1 epoch"})
    assert page.index("The lead falls.") < page.index("<table") and "FedUA beats FedDF, which beats FedAvg" in page
    assert "BALD" not in page


def test_a_box_groups_claims_that_share_a_qualifier_and_the_paper_cell_folds_its_detail():
    rows = ledger.with_holm(pd.concat([_judged_row(), _judged_row(claim="KnFu > Selective-FD (MNIST, schedules tuned)"),
                                       _judged_row(claim="Local ≥ every sharing method (CIFAR-10, as coded)",
                                                   paper="holds, +0.74 (Holm-corrected: 3 hold; no spread printed)")],
                                      ignore_index=True))
    html = ledger.verdict_rows_html(rows, lambda row: "x.html", grouped=True)
    assert html.count('class="fedkd-group"') == 1 and ">MNIST, schedules tuned</td>" in html
    assert ">KnFu beats FedMD</a>" in html and "Local does at least as well as every sharing method (CIFAR-10, as coded)" in html
    shown = html.replace(html[html.rindex("<details"):html.rindex("</details>")], "")
    assert "holds, +0.74 <small>(no spread printed)</small>" in html and "Holm-corrected: 3 hold" not in shown


def test_a_claims_own_bracket_is_not_a_group():
    claims = ["A has the best accuracy (those run)", "A has the best loss (those run)", "A > B (MNIST, tuned)",
              "A > C (MNIST, tuned)"]
    assert ledger.qualifier_groups(claims) == ["", "", "MNIST, tuned", "MNIST, tuned"]
