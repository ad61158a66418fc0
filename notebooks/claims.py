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
# committed (the paper profile for KnFu, the reduced profiles for FedUA, FedGMKD and FedCKD), never
# from a number typed into a page. Each claim is counted the same way on the paper's own table and on
# ours, by the function its chapter uses: a claim about $n$ cells **holds** when it is true in
# all $n$ of ours, **partly** when in some, **does not hold** when in none. Claims whose data are
# not available offline say so, and claims of a chapter without committed records say that.
#
# | | |
# |---|---|
# | **Sources** | `fedkd_core.chapters.<chapter>.ledger_rows()`, gathered by `fedkd_core.chapters.ledger.ledger()` |
# | **Records** | `results/paper/`, `results/reduced/` and `results/robustness/`, as committed by the sweeps (`python -m fedkd_core.sweep <chapter> --params notebooks/params/<profile>/<chapter>.yaml`) |
# | **Robustness** | for the claims a chapter reruns over the choices its paper leaves open (`ROBUSTNESS` in the chapter's module: optimiser, learning rate, rounds, thresholds, ...), in how many of those variants the claim holds in every cell. All four chapters define a grid (`notebooks/params/robustness/<chapter>.yaml`, run with `python -m fedkd_core.sweep <chapter> --params … --robustness`, one variant at a time with `--variant NAME`); a variant counts once all its runs are committed, and only for the claims it bears on (one that changes none of the methods a claim compares, such as Selective-FD's threshold for "KnFu > FedMD", leaves that claim as read); the count also says how many of the planned variants have run |

# %% tags=["parameters", "remove-input"]
profile = "smoke"

# %% tags=["remove-input"]
from IPython.display import HTML, Markdown, display

from fedkd_core import report
from fedkd_core.chapters import ledger, notebook_params

params = notebook_params(ledger.Params, globals())
display(report.parameters_table(params))

# %% [markdown]
# ## Every claim
#
# "paper's tables": in how many of the paper's cells the claim is true (for KnFu, over the cells
# we ran); "ours": the same count on our records; "evidence": the profile, runs, seeds and rounds
# behind ours; "robustness": in how many variants of the unstated choices the claim holds in every
# cell (variants whose runs are all committed). The link leads to the section of the chapter that
# computes the claim.

# %% tags=["hide-input"]
table = ledger.ledger()
display(HTML(ledger.linked_table(table)))

# %% [markdown]
# ## Verdicts per chapter

# %% tags=["hide-input"]
display(ledger.verdict_counts(table))
judged = table[~table.verdict.isin([ledger.NO_RECORDS, ledger.UNTESTABLE])]
display(Markdown(f"{len(judged)} of {len(table)} claims are judged from committed records: "
                 + ", ".join(f"{n} {word}" for word, n in judged.verdict.value_counts().items()) + "."
                 if len(judged) else "No claim is judged yet: no chapter has committed records."))

# %% [markdown]
# ## Robustness: the variants, claim by claim
#
# Per variant of the choices a paper leaves open: in how many cells each claim holds (mean over
# seeds), the mean effect in points (e.g. KnFu's ALMA minus FedMD's; for FedUA's "loses less as C falls", FedDF's relative drop minus FedUA's, in percent) and its spread over seeds.
# A variant that changes none of a claim's methods is not listed for it.

# %% tags=["hide-input"]
from fedkd_core.chapters import CHAPTERS, chapter_module, robustness  # noqa: E402

for name in (n for n in CHAPTERS if hasattr(chapter_module(n), "ROBUSTNESS")):
    robustness.show(chapter_module(name), name)
