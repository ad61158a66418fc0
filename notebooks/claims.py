# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Claims: what holds up
#
# Every claim of the four papers, judged from the committed records: our word and effect (points,
# 95% interval) beside the paper's tables judged alike. [What the words mean](#what-the-words-mean).

# %% tags=["parameters", "remove-input"]
profile = "smoke"

# %% tags=["remove-input"]
from IPython.display import HTML, Markdown, display

from fedkd_core import glance, plots, report, tables
from fedkd_core.chapters import knfu, ledger, notebook_params

params = notebook_params(ledger.Params, globals())
plots.use_book_style()
table = ledger.ledger()
if finding := knfu.tuning_finding_text(knfu.tuning_finding(), short=True):
    display(HTML(f'<p class="fedkd-headline"><b>KnFu: the lead is mostly tuning.</b> {finding}</p>'))
display(HTML(ledger.verdict_rows_html(table, lambda row: ledger.claims_page_link(row), caveats=glance.caveats(short=True),
                                      paper_names=True, words_link="#what-the-words-mean")))

# %% [markdown]
# ## What the words mean
#
# - ***holds*** / ***does not hold***: the claim's 95% interval over cells lies above / below zero.
#   It counts the spread between cells, so it speaks for the paper's settings in general; with fewer
#   than three independent cells the word says it covers only those (*holds on these 2 cells*).
# - ***mixed***: some cell is decided each way (cells Holm-corrected across the claim's cells): the
#   claim depends on the setting.
# - ***inconclusive***: the interval contains zero; ▸ details says how many seeds per cell would decide
#   an effect of 1 point, or that any effect is smaller than that.
# - ***inconclusive after correction***: decided on its own, but not once Holm's correction over its
#   paper's claims is applied (**‡**; the effect is still printed).
# - *(small)* beside a word: the whole interval lies within 1 point of zero.
# - ***untested at this scale***: every cell's runs were still rising or evaluated fewer than 10
#   times. ***not judged: unequal tuning***: the methods compared were not tuned alike.
#   ***not testable offline***: the paper's data are not available here.
# - A diverged run counts as its method's failure; the verdict with it left out is beside it.
#
# "The paper's tables" applies the same test to the paper's printed numbers over the cells our
# verdict reads; where the paper prints no spread, only signs are counted.

# %% [markdown]
# ## Verdicts per chapter

# %% tags=["hide-input"]
tables.show(ledger.verdict_counts(table))
judged = table[~table.verdict.isin(ledger.V.NOT_JUDGED)]
display(Markdown(f"{len(judged)} of {len(table)} claims are judged from committed records: "
                 + glance.count_line(judged.verdict).split(": ", 1)[1] + "."
                 if len(judged) else "No claim is judged yet: no chapter has committed records."))
families = {chapter: ledger.holm_count(rows) for chapter, rows in table.groupby("chapter", sort=False)}
if any(families.values()):
    display(Markdown("Judged together ([many claims at once](#how-verdicts-are-computed)): "
                     + "; ".join(f"{chapter}, {text}" for chapter, text in families.items() if text) + "."))

# %% tags=["remove-input"]
reruns = ledger.reruns_table()
if ledger.reruns_left(reruns):  # a status table with nothing left to run is not shown
    display(Markdown("**Reruns at a larger scale.** A chapter's verdicts move onto a rerun once every run of it "
                     "is committed (FedCKD's claim by claim); until then they rest on the smaller profile. "
                     "`python -m fedkd_core.sweep CHAPTER --params notebooks/params/RERUN --workers 2` continues one."))
    tables.show(reruns, legend=f"One core's time left at the pace of the finished runs, on {ledger.rerun_machines()}.")

# %% [markdown]
# ## How verdicts are computed
#
# **A claim is an effect.** "KnFu > FedMD" is KnFu's final ALMA minus FedMD's, in points, in every
# *cell* (a setting of the paper's table: dataset, α, |D_n|, ...) and seed; runs of one seed share
# their data and initialisation, so each seed's effect is a paired difference. Composite claims are
# effects too ("best of the methods": minus the best other one; "A > B > C": the smaller margin).
#
# **One cell**: a 95% t-interval on the per-seed effects (n − 1 degrees of freedom); the cell holds,
# is reversed or is inconclusive, Holm-corrected across the claim's cells. Cells that read the
# same runs (FedGMKD's local and global accuracy of one run; FedUA's drops from C = 1) are first
# pooled by seed into one independent *unit*, so no run counts twice.
#
# **The cells together** (the *random-cells* reading, which decides the word): a t-interval on the
# K unit means with equal weights and K − 1 degrees of freedom, the Hartung–Knapp form of a
# random-effects meta-analysis. Its variance carries both the seed noise and the spread between
# cells, reported as Hedges' τ; the 95% *prediction interval* for a new cell (Higgins et al.) is
# mean ± t(K − 2)·√(τ² + SE²). With unit means $\bar d_1, \dots, \bar d_K$, their mean $\bar d$
# and standard deviation $s$:
#
# $$\bar d \pm t_{K-1}\,\frac{s}{\sqrt K} \quad\text{(the claim)}, \qquad
#   \bar d \pm t_{K-2}\,\sqrt{\hat\tau^2 + s^2/K} \quad\text{(a new cell)}.$$
#
# With fewer than three units the *fixed-cells* reading decides
# instead (seeds random, cells fixed; Welch–Satterthwaite degrees of freedom), and the word says it
# covers only these cells. *mixed* comes from the per-cell words after their Holm correction.
#
# **Diverged runs** (FedCKD) count as their method's failures, scored at the worst accuracy any
# finished run reached in their cell; the verdict with them left out stands beside.
#
# **Many claims at once.** Each interval is 95% on its own, so each paper's claims are one family:
# Holm's step-down correction keeps at most 5% the chance that any decided verdict calls a zero
# effect non-zero, and a verdict it does not keep reads *inconclusive after correction* (‡).
#
# **The convergence gate.** A cell counts only if every run behind it was evaluated at least 10
# times and every method's mean curve gained less than 1 point over the last 20% of the rounds
# (except at a round budget the paper itself fixes, where a still-rising method is the paper's
# protocol: the note says what leaving it out would change). The *best round* of each run is shown
# as a diagnostic in ▸ details, with no word. Where an effect pairs runs from machines not shown to
# compute alike, the interval is widened by the drift measured between them.
#
# **The paper's side.** Where a paper prints mean ± std, each cell's effect gets a Welch t-interval
# (the delta method for composite claims), assuming a number of runs behind each printed std that
# the papers rarely give: 3 for KnFu and FedCKD (KnFu says three), 6 for FedUA ("more than five
# times"). The cells are then read as ours. FedGMKD prints no spread: its side counts signs. How the
# paper's own verdicts move with that assumption, on all of the paper's cells:

# %% tags=["remove-input"]
tables.show(ledger.paper_runs_table(), legend="The paper's verdict on each claim over every cell of its tables, "
            "assuming 2, 3 or 5 runs behind each printed mean ± std (Welch); * marks the number the ledger assumes. "
            "With three cells or more the interval is a t-interval on the cell means, which the assumed runs do not "
            "move; they move the claims read on fewer cells. The rows at the top read only the cells our verdict "
            "reads, so their paper column can differ from this one.")

# %% tags=["remove-input"]
from fedkd_core import numerics, performance  # noqa: E402
from fedkd_core.cpuinfo import machine_text  # noqa: E402
from fedkd_core.verdicts import MACHINE_DRIFT, effect_drift  # noqa: E402

drift = [summary for summary in performance.drift_summary(performance.drift_pairs(performance.ROOT / "results"))
         if not summary["same machine"]]
alike = numerics.agreeing_machines(numerics.rerun_pairs())
display(Markdown(
    "**Machines.** The same config and seed run on another CPU in fp32 need not give the same numbers: other "
    "kernels round differently, and training compounds it. "
    + "".join(f"In the committed records, {performance.drift_sentence(summary)}. " for summary in drift)
    + "".join(f"Runs made on one of {machine_text(one)} and {machine_text(other)} and rerun on the other in fp32 came "
              "out identical (to 0.01 points), so the two count as one machine here. " for one, other in alike)
    + f"The verdicts allow a drift of {MACHINE_DRIFT:.2f} points per run: a verdict one of whose effects pairs runs "
    "of a cell and seed from machines not shown to compute alike has its interval widened by "
    f"√2 × {MACHINE_DRIFT:.2f} = {effect_drift():.2f} points on each side (two runs in each effect). The book's "
    "Performance page sets this beside direct reruns of stored records."))

# %% [markdown]
# ## Earlier design: robustness grids
#
# The grids below rerun each chapter's claims under the choices its paper leaves open (optimiser,
# learning rate, thresholds, ...), on the profile each grid was designed for: KnFu's on the round
# as first coded, not the tuned schedules its verdicts use; FedUA's and FedCKD's on superseded
# reduced designs. They are kept for the record, folded: open the output to read them.

# %% tags=["remove-input", "hide-output"]
from fedkd_core.chapters import CHAPTERS, chapter_module, robustness  # noqa: E402

for name in (n for n in CHAPTERS if hasattr(chapter_module(n), "ROBUSTNESS")):
    robustness.show(chapter_module(name), name)

# %% [markdown]
# ## Where the verdicts come from
#
# | | |
# |---|---|
# | **Sources** | `fedkd_core.chapters.<chapter>.ledger_rows()`, gathered by `fedkd_core.chapters.ledger.ledger()`; the statistics in `fedkd_core.verdicts` |
# | **Records** | `results/paper/`, `results/reduced/` and `results/robustness/`, as committed by the sweeps (`python -m fedkd_core.sweep <chapter> --params notebooks/params/<profile>/<chapter>.yaml`) |
# | **Robustness** | for the claims a chapter reruns over the choices its paper leaves open (`ROBUSTNESS` in the chapter's module: optimiser, learning rate, rounds, thresholds, ...), the verdict under each of those variants. All four chapters define a grid (`notebooks/params/robustness/<chapter>.yaml`; FedGMKD's verdicts read its 50-round grid, `robustness/redesign/fedgmkd.yaml`, since its 50-round rerun completed; run with `python -m fedkd_core.sweep <chapter> --params … --robustness`, one variant at a time with `--variant NAME`); a variant counts once all its runs are committed, and only for the claims it bears on (one that changes none of the methods a claim compares, such as Selective-FD's threshold for "KnFu > FedMD", leaves that claim as read) |

# %% tags=["remove-input"]
parameters = report.parameters_table(params)
if len(parameters):
    tables.show(parameters)
else:  # the page reads committed records only: the profile just names the build
    display(Markdown(f"This page reads committed records only; it was built with the {params.profile} profile "
                     "and has no other parameters."))
