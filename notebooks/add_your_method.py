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
# # Add your method
#
# Where does *your* method stand on these papers' settings, against their baselines, with the
# papers' numbers beside? This page is the whole path, executed: a method of about thirty lines,
# registered with the package, checked against the contract every method here keeps, and ranked
# among a chapter's methods in that chapter's own cells and seeds.
#
# The example is **FedAvg with server momentum** (FedAvgM; Hsu, Qi and Brown, 2019). The server
# treats the mean of the clients' models $\bar w$ as a step from its model $w$ and keeps a
# velocity $v$:
#
# $$v \leftarrow \beta v + (\bar w - w), \qquad w \leftarrow w + \eta_s v,$$
#
# with $\beta = 0$ and $\eta_s = 1$ giving FedAvg back. Everything else (local SGD from the
# global model, the sample-size weights of $\bar w$) is FedAvg's.
#
# | | |
# |---|---|
# | **Shows** | `fedkd_core.algorithms.register`, `fedkd_core.conformance.check`, `fedkd_core.compare` |
# | **Compared on** | the KnFu chapter's cells by default (`chapter`), at its smoke scale: MNIST, Dir(0.5), 4 clients, 2 rounds |
# | **Contract** | `fedkd_core.contracts` (the members a method and a chapter have, each documented once); `CONTRIBUTING.md` |
# | **Rerun** | `papermill notebooks/add_your_method.ipynb out.ipynb -p chapter fedckd -p seeds 3` |
#
# The notebook's own defaults are the smoke profile (seconds, for CI); `make book` injects
# `notebooks/params/quick/add_your_method.yaml`. The table below says which ran this page.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
chapter = "knfu"
chapter_params = ""
seeds = 1
beta = 0.9

# %% tags=["remove-input"]
import pandas as pd
from IPython.display import Markdown, display

from fedkd_core import tables
from fedkd_core.chapters import add_your_method, notebook_params
from fedkd_core.chapters import card
from fedkd_core.report import parameters_table

params = notebook_params(add_your_method.Params, globals())
display(Markdown(f"This page ran with the **{params.profile} profile** ({card.PROFILE_TEXT.get(params.profile, 'custom parameters')}):"))
tables.show(parameters_table(params))

# %% [markdown]
# ## The method
#
# A method is a class with a frozen `Config` (its settings: they become the run's
# `algorithm_params` and key its records) and the steps of a round (`fedkd_core.contracts.AlgorithmProtocol`).
# FedAvgM inherits FedAvg's download, local training and upload and rewrites only the server's
# step. The velocity is the server's own state: nothing a client keeps, so `CLIENT_STATE` stays
# FedAvg's. A method that distils over a shared set would say so with `NEEDS = frozenset({"transfer_set"})`,
# and a chapter whose runs set none aside would refuse it with that reason.

# %%
from dataclasses import dataclass

import torch

from fedkd_core.aggregate import weighted_average
from fedkd_core.algorithms import register
from fedkd_core.algorithms.fedavg import FedAvg


@dataclass(frozen=True)
class FedAvgMConfig:
    beta: float = 0.9  # server momentum
    server_lr: float = 1.0  # the server's step size


class FedAvgM(FedAvg):
    """FedAvg whose server takes a momentum step towards the clients' mean model."""

    Config = FedAvgMConfig

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        self.velocity = {name: torch.zeros_like(t) for name, t in self.model.state_dict().items()
                         if t.is_floating_point()}

    def server_update(self, uploads):
        clients = sorted(uploads)
        mean = weighted_average([uploads[k] for k in clients], [self.ctx.client_size(k) for k in clients])
        state = self.model.state_dict()
        for name, velocity in self.velocity.items():
            velocity.mul_(self.config.beta).add_(mean[name] - state[name])
            mean[name] = state[name] + self.config.server_lr * velocity
        self.model.load_state_dict(mean)


register("fedavgm", FedAvgM);  # now ExperimentConfig(algorithm="fedavgm"), the records and compare know it

# %% [markdown]
# ## Does it keep the contract?
#
# `conformance.check` runs the method on a tiny real configuration (3 MNIST clients, 2 of them
# per round) and tests what every number in this book relies on: a client's steps give the same
# numbers on another copy of the method after `load_client_state` (so they may run in another
# process), two runs of one seed agree whatever the global random generators held, the bytes a
# run records are those of its messages, and (with the method in a module of its own) the same
# run on Flower gives identical numbers. A method defined in a notebook skips that last check:
# Flower's client processes import a method by its module. Every method of the package passes
# the same checks in `tests/test_conformance.py`.

# %% tags=["remove-cell", "nbval-check-output"]
# nbval checks this printed summary against the stored one; the book shows the table below
from fedkd_core import conformance

findings = conformance.check(FedAvgM, params={"beta": params.beta}, flower=False)
print(pd.DataFrame([f.__dict__ for f in findings])[["check", "status"]].to_string(index=False))

# %% tags=["hide-input"]
tables.show(pd.DataFrame([f.__dict__ for f in findings]))

# %% [markdown]
# ## Where it stands
#
# `compare` runs FedAvgM in every setting of the chapter's grid: the same data split, model,
# training settings, rounds and seeds as the chapter's own methods. It takes their runs from the
# stored records where the very same run exists (the committed paper and reduced records, at
# those profiles) and runs the rest. Within a cell the methods are ranked by the chapter's own
# metric (for KnFu: ALMA after the last round), with the paper's number beside each of its methods
# where the paper prints that cell; at this page's scale the paper's numbers are a reference, not
# a target. Below each cell: FedAvgM minus the chapter's proposed method, paired by seed, with its
# 95% t-interval (none with a single seed).

# %% tags=["hide-input"]
from fedkd_core.compare import cell_display, compare, interval_text

result = compare(FedAvgM, params.chapter, params.compared(), method_params={"beta": params.beta})
print(f"{result.ran} runs made now, {result.stored} of the chapter's runs read from stored records")
for cell, table in result.ranking.groupby(list(result.cell_keys), sort=False):
    print(", ".join(f"{k} = {v}" for k, v in zip(result.cell_keys, cell if isinstance(cell, tuple) else (cell,))))
    tables.show(cell_display(table))

effects = result.effects.assign(**{f"{result.claim} (points)": [interval_text(r) for r in result.effects.itertuples()]})
tables.show(effects[[*result.cell_keys, "seeds", f"{result.claim} (points)", "outcome"]])
print(f"Pooled over {result.verdict.cells} cell(s): {result.verdict.word}, {result.verdict.effect_text} points")

# %% [markdown]
# The same from a shell, with the method in a module of its own (`my_methods.py` on the
# `PYTHONPATH`) and another chapter's profile:
#
# ```bash
# python -m fedkd_core.compare my_methods:FedAvgM --chapter knfu                    # smoke cells, seconds
# python -m fedkd_core.compare my_methods:FedAvgM --chapter fedua \
#     --params notebooks/params/reduced/fedua.yaml -p seeds 1 -m beta 0.5          # FedUA's reduced cells
# python -c "from my_methods import FedAvgM; from fedkd_core.conformance import check; check(FedAvgM)"
# ```
#
# New records go under `results/custom/<name>/`; a record is keyed by its configuration, not by
# the method's code, so `compare` runs the new method again each time unless asked to reuse its
# records (`--reuse`). How to add a method to the package itself, a chapter or a profile, and
# what to run before a change: `CONTRIBUTING.md`.
