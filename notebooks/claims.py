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
# Every claim the four papers make about their tables, judged from the records this book has
# committed, never from a number typed into a page: KnFu at the paper's scale, FedUA on its
# reduced profile, FedGMKD and FedCKD on their reduced profiles or, once it is complete, on their
# rerun at a larger scale (FedGMKD: the paper's 50 rounds; FedCKD: its paper-scale Fashion-MNIST
# column, claim by claim, as soon as every run a claim compares is finished). KnFu's verdicts rest on its reruns under schedules tuned with the same budget for every
# method (MNIST, then CIFAR-10). Each row's scale says which records it rests on, and [Reruns at a larger
# scale](#reruns-at-a-larger-scale) how far each rerun has got. The landing page summarises this table; each chapter opens
# with its own rows of it. The verdicts come first; how they are computed, and from which
# records, follows them ([How verdicts are computed](#how-verdicts-are-computed)).

# %% tags=["parameters", "remove-input"]
profile = "smoke"

# %% tags=["remove-input"]
from IPython.display import HTML, Markdown, display

from fedkd_core import glance, plots, report, tables
from fedkd_core.chapters import ledger, notebook_params

params = notebook_params(ledger.Params, globals())
plots.use_book_style()
table = ledger.ledger()

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

# %% [markdown]
# ## Reruns at a larger scale
#
# Where a chapter's evidence is being rerun at a larger scale, its verdicts move onto the rerun only
# once every run of it is committed (or diverged), never onto the seeds it reached first; until
# then they rest on the smaller profile, and its rows say so. FedCKD's move claim by claim: a claim
# moves once every run *it compares* is finished, so that no run still to come can change it (its
# row's scale says which it rests on). How far each rerun has got, counted
# from the committed records, and the compute time left on one core at the pace of its finished
# runs (two sweep workers on two cores halve the wall time; a run that two reruns both plan, such as
# FedCKD's γ = 0.99 runs, counts in the first only). A
# robustness grid (a `robustness/` path) follows its chapter's verdicts: it counts once they have
# moved and all its runs are finished. `python -m fedkd_core.sweep CHAPTER --params
# notebooks/params/RERUN --workers 2` (with `--robustness` for a grid) continues one where it stopped.

# %% tags=["hide-input"]
tables.show(ledger.reruns_table(), legend=f"One core's time left at the pace of the finished runs made on CPUs, on "
            f"{ledger.rerun_machines()} (runs made on a GPU, sharing the device, do not set a core's pace).")

# %% [markdown]
# ## Every claim
#
# "verdict" and "effect": ours, on each run's final reading (its final evaluation; FedGMKD's, the
# mean of its last evaluated rounds, as its paper reports), with the pooled 95% interval in points;
# "cells": how many of the claim's cells hold, are reversed or are inconclusive on their own;
# "the paper's tables": the same test on the paper's tables. Under each claim, in small print: the
# scale of our runs, the records behind them (profile, runs, seeds, rounds), the verdict on each
# run's best round where it differs (⚑), its robustness (the verdicts under the variants of the
# unstated choices whose runs are all committed, where the chapter's grid reads the claim), for a
# decided verdict whether Holm's correction over its chapter's claims keeps it (a ‡ beside the word
# where it does not: [many claims at once](#how-verdicts-are-computed)), and what the gate left out
# or more seeds would buy. The claim links to the table in its chapter that it rests on.

# %% tags=["hide-input"]
display(HTML(ledger.linked_table(table)))

# %% [markdown]
# ## Robustness: the variants, claim by claim
#
# Per variant of the choices a paper leaves open: each claim's verdict, its pooled effect in points
# with the 95% interval (`low`, `high`; e.g. KnFu's ALMA minus FedMD's; for FedUA's "loses less as C
# falls", FedDF's relative drop minus FedUA's, in percent), the cells holding and reversed, and the
# spread over seeds. A variant that changes none of a claim's methods is not listed for it.

# %% tags=["hide-input"]
from fedkd_core.chapters import CHAPTERS, chapter_module, robustness  # noqa: E402

for name in (n for n in CHAPTERS if hasattr(chapter_module(n), "ROBUSTNESS")):
    robustness.show(chapter_module(name), name)

# %% [markdown]
# ## How verdicts are computed
#
# **A claim is an effect.** "KnFu > FedMD" is KnFu's final ALMA minus FedMD's, in points, in every
# cell (one setting of the paper's table: dataset, α, |D_n|, ...) and seed. Runs of one seed share
# their data partition and initialisation, so the effect of seed *s* is the *paired* difference of
# the two methods' seed-*s* runs. Composite claims are effects too: "best of the methods" is the
# method minus the best other one; "FedUA > FedDF > FedAvg" is the smaller of its two margins;
# "loses less as C falls" is the difference of the relative drops from C = 1.
#
# **Per cell**, a 95% t-interval on the paired per-seed effects (n − 1 degrees of freedom): the
# cell *holds* when the interval lies above zero, is *reversed* when it lies below, and is
# *inconclusive* otherwise (always, with one seed).
#
# **Per claim**, the mean of the per-cell means, with a 95% interval in which the cells are the
# fixed settings the paper chose and the seeds are the randomness: its variance is
# $\sum_c s_c^2 / n_c \,/\, k^2$ over the $k$ cells (seed std $s_c$, $n_c$ seeds), with
# Welch–Satterthwaite degrees of freedom. We chose this over a t-interval on the $k$ cell means
# (cells as a random sample of settings) because the claims are about *these* settings, and with
# the 2-4 cells of a reduced profile a between-cell interval (t with 1-3 degrees of freedom) could
# never decide anything; the per-cell words keep the heterogeneity visible instead (*partly*). A
# hierarchical bootstrap over cells then seeds has the same problem with few cells; on many seeds
# per cell the interval agrees with a stratified bootstrap (`tests/test_verdicts.py`).
#
# **Many claims at once.** Each interval is 95% on its own, so among a chapter's ten claims one
# could read *holds* by chance alone. Each verdict's interval inverts a test of "the pooled effect is
# zero", whose p-value is below 0.05 exactly where the interval excludes zero (where the interval
# is widened for machines that round differently, the widening is taken off first). Each
# chapter's claims judged with an interval are one family, and Holm's step-down correction keeps
# at most 5% the chance that any decided verdict (*holds*, *partly*, *does not hold*) of the
# chapter calls an effect that is really zero non-zero, whatever the dependence between the claims
# (they share runs). A decided verdict it does not keep is marked **‡**, with its p-value: its own
# interval excludes zero, but judged with the chapter's other claims it is weaker evidence than
# the word alone says; one it keeps says so, with its p-value, under the claim. What Holm's
# correction does not cover: the direction of an effect (a *holds* whose true effect is negative)
# is guaranteed only for independent claims; the reversed cells of *partly* are per-cell words
# outside the family; and each p-value is a Welch–Satterthwaite t approximation over 2-5 seeds
# per cell.
#
# **The words.** *holds*: the claim's interval lies above zero and no cell is reversed; *partly*:
# above zero, some cell reversed; *does not hold*: below zero; *(small)* beside a decided word:
# the whole interval lies within 1 point of zero (`verdicts.under_a_point`), so the direction is
# decided and the size is not one to build on: under a point, the order of the drift between CPUs
# measured below; *inconclusive*: it contains zero —
# the note then says how many seeds per cell would decide an effect of 1 point at the observed
# spread, or that the interval already rules out effects of 1 point (any effect is smaller);
# *not judged: unequal tuning*: the effect is measured and shown, but the methods it compares did not
# get the same tuning budget and tuning changed the same claim where it was done; the note gives the
# measured verdict and what tuning did to it elsewhere. KnFu's CIFAR-10 rows as first coded read so
# until their rerun under the schedules tuned on MNIST was complete.
#
# **Beside the paper's effect.** The paper's side is judged on the cells our verdict's interval reads
# (those that pass the convergence gate and have two seeds or more; a one-seed cell has no spread);
# for a claim *untested at this scale* (the gate kept no cell), on every cell we ran. Where
# it *holds* (or *partly*), our verdict says how our effect compares with the paper's
# (`fedkd_core.verdicts.versus_paper`): *smaller than* or *larger than the paper's* where the two 95%
# intervals do not overlap, *consistent with the paper's* where they do, and for an inconclusive
# claim whose interval lies below the paper's, *rules out the paper's effect*. Where the paper
# prints no spread, its effect is a single value and our interval is set against that
# value, named: *below*, *above* or *consistent with the paper's +5.0, no spread printed*, or *rules
# out* it. Nothing is said where the paper's tables do not show the claim, or where its verdict
# comes from cells we did not run.
# A claim can hold here and still be much smaller than the paper reports.
#
# **The convergence gate.** A cell counts only if every run behind it was evaluated at least 10
# times and every method's mean curve gained less than 1 point over the last 20% of the rounds.
# The gain averages three evaluations at each end (the last three, and the three ending at 80% of
# the rounds; fewer when fewer lie after that point): one evaluation moves by up to a point from
# round to round, and the gate must not read that noise as a rise or a plateau.
# A claim's gate reads every method its effect reads: for "FedCKD > pFedSD" those two, for "FedCKD
# best of the methods run" every method run (a method is read where moving its accuracy far above
# or below the others' changes the effect).
# A cell that fails is left out and a claim with no cell left is *untested at this scale*, with the
# reason: first a cell evaluated fewer than 10 times (FedUA's robustness grid, on its first reduced
# design, evaluates 5 times), then the methods still rising. This holds on the reduced profiles and
# wherever the round budget is ours: KnFu's paper gives none (R = 15 on MNIST and 30 on CIFAR-10
# are our choices), so its paper-profile cells are gated too. Only at a round budget the paper
# itself fixes, on the paper's data (FedCKD's paper-scale column, T = 100; FedGMKD's rerun at
# T = 50, 500 images per client) is a method still rising the paper's protocol:
# there the cell counts, the note says how many were still rising and, where leaving them out
# would change the verdict, what it would read. Each chapter's "claims, cell by cell" figures mark
# a left-out cell ○.

# %% tags=["remove-input"]
from fedkd_core.chapters import chapter_module  # noqa: E402

readings: dict[str, list[str]] = {}
for chapter in dict.fromkeys(table.chapter):
    readings.setdefault(ledger.final_reading(chapter_module(chapter.lower())), []).append(chapter)
display(Markdown(
    "**Final and best round.** Verdicts read each run as its paper's tables report accuracy: "
    + "; ".join(f"{' and '.join([', '.join(chapters[:-1]), chapters[-1]] if len(chapters) > 1 else chapters)}, {reading}"
                for reading, chapters in readings.items())
    + ". The *best round* column judges each run at its best single evaluation instead, and ⚑ marks a claim "
    "whose verdict differs between the two: a method whose accuracy falls late in its runs is judged "
    "differently (as first coded, FedMD fell so on CIFAR-10 at α = 0.1; the chapters' learning curves show "
    "which runs fall now)."))

# %% [markdown]
# **The paper's side.** Where a paper prints mean ± std, each method's cell mean is drawn from a
# normal with that mean and std/√n (a seeded parametric bootstrap of 4,000 draws), the same
# effect function is applied to every draw, and the 2.5 and 97.5 percentiles give the intervals.
# The papers rarely say how many runs stand behind a std: we assume 3 for KnFu and FedCKD and 6 for
# FedUA ("repeated more than five times"). The paper's runs are not paired, so this is a little
# wider than a paired test would be. FedGMKD prints no spread: its side counts signs ("no spread
# printed"). The paper's side is computed over the cells we ran, except for a claim that none of
# our cells share (FedCKD's annealing claim, CIFAR-100 in the paper and Fashion-MNIST here).

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
    + f"The verdicts allow `fedkd_core.verdicts.MACHINE_DRIFT` = {MACHINE_DRIFT:.2f} points per run: a verdict, or a "
    "robustness variant, one of whose effects pairs runs of a cell and seed from machines not shown to compute alike "
    f"has its interval widened by √2 × {MACHINE_DRIFT:.2f} = {effect_drift():.2f} points on each side (two runs in "
    "each effect; `fedkd_core.numerics`). The book's Performance page sets this beside direct reruns of stored "
    "records (`benchmarks/precision_drift.py`), and `results/README.md` says how each was measured."))

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
