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
# # The federated setting
#
# Every chapter of this book trains models on data that is **split among clients**, and the way
# it is split decides most of what happens afterwards. This chapter builds that setting once, on
# the real MNIST and CIFAR-10 images, and runs the two reference points every paper compares
# against:
#
# * **Local** — each client trains only on its own data and never communicates;
# * **FedAvg** (McMahan et al., 2017) — each round the server sends the global model, every
#   selected client runs local SGD, and the server replaces the global model by the sample-size
#   weighted mean $w \leftarrow \sum_k \frac{n_k}{\sum_j n_j} w_k$.
#
# | | |
# |---|---|
# | **Reproduces** | no single paper: the shared setting of the KnFu, FedCKD, FedUA and FedGMKD chapters |
# | **Datasets** | MNIST (offline PNG re-encoding), CIFAR-10 (offline JPEG re-encoding, see `../shared/data/README.md`) |
# | **Partitions** | Dirichlet label skew Dir($\alpha$), pathological $s$ classes per client, FedBE's step split |
# | **Models** | KnFu's M1 (MNIST) and M2 (CIFAR-10), `fedkd_core.models` |
# | **Metrics** | ALMA: mean over clients of each client's accuracy on its *local* test set (drawn from the test split with the client's class proportions); global accuracy on the test split |
# | **Rerun** | `papermill notebooks/setting.ipynb out.ipynb -f notebooks/params/quick/setting.yaml -p alphas "0.05,1.0"` |
#
# The table below gives the parameters this page was executed with, and names their profile: the
# notebook's own defaults are the seconds-long **smoke** profile (CI); `make book` injects the quick
# profile (`notebooks/params/quick/setting.yaml`), whose 48 runs are those of the committed
# **reduced** profile (`notebooks/params/reduced/setting.yaml`, fp32): the book reads their records,
# and the tables name that profile; `notebooks/params/paper/setting.yaml` holds the full-scale
# settings. A rerun with other parameters trains only the runs no record holds.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
datasets = "mnist"
alphas = "0.5"
algorithms = "local,fedavg"
seeds = 1
num_clients = 4
samples_per_client = 100
local_test_size = 100
global_test_size = 500
rounds = 2
participation = 1.0
local_epochs = 1
batch_size = 32
lr = 0.05
momentum = 0.9
mixed_precision = "auto"

# %% tags=["remove-input"]
import pandas as pd
from IPython.display import Markdown, display

from fedkd_core import partition, plots, report, tables
from fedkd_core.chapters import notebook_params, setting
from fedkd_core.data import load_dataset
from fedkd_core.results import run_grid

params = notebook_params(setting.Params, globals())
plots.use_book_style()
tables.show(report.parameters_table(params))

# %% [markdown]
# ## How the partitions look
#
# Each panel splits the MNIST training labels among 10 clients (seed 0). A bubble's area is the
# number of samples of a class a client holds. Dir($\alpha$) draws each class's shares over the
# clients from a Dirichlet distribution: small $\alpha$ gives each client a few dominant classes,
# large $\alpha$ approaches IID (KnFu Fig. 2). The pathological split gives every client exactly
# two classes (FedCKD Fig. 3). The step split is FedBE's, which the FedUA chapter uses:

# %% tags=["remove-input"]
step = setting.step_split()
display(Markdown(setting.step_split_text(step)))

# %% tags=["hide-input"]
labels = load_dataset("mnist").y_train.numpy()
splits = {
    "Dir(0.1)": partition.dirichlet(labels, 10, 0.1, seed=0),
    "Dir(0.5)": partition.dirichlet(labels, 10, 0.5, seed=0),
    "Dir(1)": partition.dirichlet(labels, 10, 1.0, seed=0),
    "pathological, 2 classes": partition.pathological(labels, 10, 2, seed=0),
    f"step, {step['major_classes']} major classes, {step['major_fraction'] * 100:g}%": partition.step(labels, 10, seed=0, **step),
}
fig, axes = plots.grid(len(splits), height=3.4)
for ax, (name, parts) in zip(axes, splits.items()):
    plots.label_bubbles(partition.class_histograms(labels, parts, 10), ax, name)
fig.tight_layout()
split_clients = len(next(iter(splits.values())))
plots.caption(fig, f"Each panel splits the MNIST training labels among {split_clients} clients (seed 0), computed "
                   "here, not read from records: client on x, class on y, a bubble's area proportional to that "
                   "client's images of that class (relative to the panel's largest count).")

# %% [markdown]
# How skewed is each split? For every client we measure the share of its largest class and the
# number of classes holding at least 5% of its data (mean over clients). These numbers are
# deterministic for the seed, so CI checks them.

# %% tags=["hide-input", "nbval-check-output"]
print(pd.DataFrame.from_dict({name: setting.skew_summary(labels, parts) for name, parts in splits.items()},
                             orient="index").to_string())

# %% [markdown]
# ## Local vs FedAvg across heterogeneity
#
# Every run below is one `ExperimentConfig`; `run_grid` returns the stored record when the
# same configuration has run before (records under `results/<profile>/`), so rerunning the
# chapter only computes what is new. A run whose training diverges (a loss or weights that are no
# longer finite) is a result too: it is stored as `<key>.diverged.json`, left out of the tables
# with a line saying so, and not run again.

# %% tags=["hide-input"]
configs = setting.experiments(params)
records = run_grid(configs, profile=params.profile)
finals = report.final_metrics(records)
print(f"{len(records)} runs of this page's profile '{params.profile}', their records of profile "
      f"{', '.join(sorted({record.profile for record in records}))}, "
      f"{sum(r.timings['total_seconds'] for r in records):.0f} s of compute in their records")

# %% [markdown]
# Final-round ALMA and global accuracy, mean ± std over seeds (in %). For Local there is no
# global model; for FedAvg every client's personal model *is* the global model, so its ALMA is
# the global model's accuracy measured on each client's local distribution.

# %% tags=["hide-input"]
tables.show(setting.accuracy_table(finals))

# %% [markdown]
# Learning curves: ALMA per round, mean over seeds with a ± 1 std band.

# %% tags=["hide-input"]
history = report.history_table(records)
panels = history[["dataset", "alpha"]].drop_duplicates().values.tolist()
fig, axes = plots.grid(len(panels))
for ax, (dataset, alpha) in zip(axes, panels):
    plots.learning_curves(history[(history.dataset == dataset) & (history.alpha == alpha)], ax,
                          title=f"{dataset}, Dir({alpha})")
fig.tight_layout()
seeds_text = plots.seeds_text(history, ["dataset", "alpha", "algorithm"])
plots.caption(fig, "ALMA (%) at each evaluated round, a line per method, a panel per dataset and Dir(α) of this "
                   f"page's runs (records of profile {', '.join(sorted(history.profile.unique()))}): the line is the "
                   f"mean over the method's seeds ({seeds_text}), the band ± 1 std over them (none with one seed).")

# %% [markdown]
# ## What the runs show
#
# What one expects: under strong label skew (small $\alpha$) a client's local test set is
# dominated by the few classes it trains on, so a purely local model scores well on it while the
# averaged model has to serve every client at once; as $\alpha$ grows the clients' tasks become
# alike and averaging should catch up and overtake. This is the tension every personalised
# distillation method in this book tries to resolve. Whether this page's runs show it is computed
# from the table below, per dataset: which method reaches the higher mean final ALMA at each
# $\alpha$, leaving out the cells where FedAvg's global model is still below twice chance level
# (there the comparison says little about averaging).

# %% tags=["hide-input"]
pivot = setting.local_vs_fedavg(finals)
tables.show(pivot, digits=1)

chance = 100 / 10
flags = [f"{dataset}, Dir({alpha}): FedAvg's global model is at {row['FedAvg global acc']:.1f}% "
         f"(chance {chance:.0f}%): it has barely started learning in {params.rounds} rounds on "
         f"{setting.images_text(params)}, so this cell says little about FedAvg."
         for (dataset, alpha), row in pivot[setting.below_twice_chance(pivot)].iterrows()]
if flags:
    display(Markdown(report.markdown_list(flags)))

# %% tags=["remove-input"]
display(Markdown(setting.conclusion_text(pivot, params, sorted(setting.accuracy_table(finals)["seeds"].unique()),
                                         [record.profile for record in records])))
