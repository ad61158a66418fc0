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
# # KnFu: Effective Knowledge Fusion
#
# KnFu (Seyedmohammadi et al.) claims that fusing clients' soft labels with *personal* weights
# beats FedMD's plain average under label skew.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
datasets = "mnist"
mnist_alphas = "0.5"
mnist_sizes = "50"
cifar_alphas = "0.1,0.5,1"
cifar_sizes = "500,1000"
algorithms = "knfu,fedmd,knfu_local,selective_fd"
seeds = 1
num_clients = 4
rounds = 2
cifar_rounds = 2
local_test_size = 100
eval_every = 1
optimizer = "adam"
lr = 0.001
momentum = 0.0
local_epochs = 1
finetune_epochs = 1
lam = 1.0
beta = 10.0
entropy_threshold = 0.5
mixed_precision = "auto"
example_alpha = 0.5
example_size = 50
example_rounds = 1
schedules = ""
tuning_schedules = ""
validation_fraction = 0.0

# %% tags=["remove-input"]
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, Markdown, display

from fedkd_core import plots, report, tables
from fedkd_core.chapters import knfu, notebook_params, reuse_message
from fedkd_core.models import InputShape, make_model
from fedkd_core.results import run_grid


params = notebook_params(knfu.Params, globals())
plots.use_book_style()

# %% [markdown]
# ## Verdict

# %% tags=["remove-input"]
from fedkd_core.chapters import ledger  # noqa: E402

finding = knfu.tuning_finding_text(knfu.tuning_finding(), short=True)
verdict_rows = ledger.verdict_box(knfu, headline=f"<b>The lead is mostly tuning.</b> {finding}" if finding else "")

# %% [markdown]
# **What the verdicts rest on.** The committed paper-profile records (20 clients, the seeds the
# records line above gives). **MNIST (Table 1)** is judged on its cells rerun with every method
# under the round schedule it chose on a validation split: the fair comparison (see "Are the
# baselines as strong as the paper's?" below, which also judges MNIST as first coded, where KnFu's
# lead was several times larger). **CIFAR-10 (Table 2)** is judged on its cells rerun with every
# method under the schedule it chose on MNIST, not re-tuned on CIFAR-10 ("Table 2 rerun under the
# same schedules" below shows each claim both as first coded and as rerun). Before that rerun was
# complete, CIFAR-10 was measured as first coded and not judged: there FedMD and Selective-FD ran
# well below the paper's own numbers, so KnFu's lead could be the schedule's rather than the
# method's (a results folder of your own without the rerun is judged so still). The tables and
# figures further down show these same records wherever they cover a cell, and this page's own
# profile's runs elsewhere (each table's caption names the profile); the runs as first coded
# appear beside the reruns in that section.

# %% [markdown]
# ## The paper and this reproduction
#
# Federated *knowledge distillation* shares predictions instead of weights: every client labels
# a shared transfer set with its model's soft labels, a fusion centre combines them, and every
# client distils the combination back into its own model. FedMD averages all clients' soft
# labels. Under label skew that average mixes in clients that know nothing about a client's
# classes. **KnFu** (Seyedmohammadi, Atapour, Abouei, Mohammadi) gives each client a *personal*
# mix instead, weighted towards the clients whose predicted class distribution resembles its own.
# Clients' data follow a Dirichlet *partition* Dir(α) (each client's class shares drawn from a
# Dirichlet distribution; the smaller α, the more skewed) with $\vert D_n\vert$ images each. Accuracy
# is **ALMA**, the *average local model accuracy*: each client's personal model on a test set drawn
# with its own class proportions, averaged over the clients.

# %% tags=["remove-input"]
from fedkd_core.chapters import card  # noqa: E402

card.show_citation("knfu")

# %% [markdown]
# | | |
# |---|---|
# | **Reproduces** | Algorithm 1; Table 1 (MNIST, 12 settings × 4 methods); Table 2 (CIFAR-10, 6 settings × 4 methods); Fig. 3 and Fig. 4 (learning curves) |
# | **Baselines** | FedMD as KnFu describes it (plain average of soft labels), Selective-FD (Shao, Wu, Zhang, 2024), Local (update and fine-tune on local data only); and **FedMD (original form)**, FedMD as its authors' code runs it (each client's Adam kept across rounds, a digest of the averaged logits with an L1 loss, then a 4-epoch revisit of the client's own data, scored after it), on MNIST (`notebooks/params/paper/knfu_fedmd_original.yaml`) and on CIFAR-10 (`notebooks/params/paper/knfu_fedmd_original_cifar10.yaml`) |
# | **Datasets** | MNIST, CIFAR-10; 20 clients, Dir($\alpha$) label skew with a fixed $\vert D_n\vert$ per client; transfer set of $\vert D_n\vert$ labelled samples, disjoint from the clients |
# | **Models** | M1 = [CU(32); CU(64); FC(64); FC(32); FC(10)] (MNIST), M2 = [CU(16); CU(16); CU(32); CU(32); FC(128); FC(10)] (CIFAR-10), `fedkd_core.models` |
# | **Metric** | ALMA: mean over clients of each personal model's accuracy on its local test set (test images drawn with the client's class proportions); final round; mean ± std over seeds |
# | **Code** | `fedkd_core/algorithms/shapes/transfer_kd.py`, `fedkd_core/algorithms/{knfu,fedmd,selective_fd,knfu_local}.py`, `fedkd_core/chapters/knfu/` |
#
# The parameters table below names the profile this page was executed with. Every table says
# which profile produced its numbers: wherever a paper-profile record of a cell exists under
# `results/paper/`, the chapter shows it instead of running the cell again.

# %% [markdown]
# ## Reproduce this chapter

# %% tags=["remove-input"]
reproduce_times = card.reproduce_box("knfu")

# %% [markdown]
# The parameters this page was executed with:

# %% tags=["remove-input"]
tables.show(report.parameters_table(params))

# %% [markdown]
# ## The method
#
# Client $n$ holds $D_n$ and a model $f(\cdot;\Omega_n)$ with softmax outputs. All clients share
# a labelled transfer set $D^t$ of $K_t$ samples. Each round $r = 1, \dots, R$ (Algorithm 1):
#
# 1. **Local training** — $E$ epochs of cross-entropy on $D_n$:
#    $\Omega_n \leftarrow \arg\min \mathbb{E}_{(x,y)\sim D_n} \mathcal{L}_{CE}(f(x;\Omega_n), y)$ (Eq. 3).
# 2. **Knowledge extraction** — $\mathbf{F}_n = f(x;\Omega_n)$ for every $x \in D^t$, a
#    $K_t \times C$ matrix uploaded to the fusion centre (Eq. 4).
# 3. **Effective knowledge fusion** at the server:
#    * the *estimated probability distribution* (EPD) of each client,
#      $\mathbf{p}(\Omega_n) = \frac{1}{K_t}\sum_{i=1}^{K_t} \mathbf{F}_n^{i}$ (Eq. 5),
#      estimates which classes client $n$'s model favours, i.e. its label distribution (Fig. 1);
#    * dissimilarities $d_{n,m} = \mathrm{KL}(\mathbf{p}(\Omega_n) \,\|\, \mathbf{p}(\Omega_m))$ (Eq. 6);
#    * weights $w_{n,m} = 1/d_{n,m}^2$ (Eq. 7), and a self weight
#      $w_{n,n} = \beta \max_{m \neq n} w_{n,m}$ (Eq. 8; $d_{n,n}=0$ would make it infinite);
#    * the personalised knowledge
#      $\mathbf{F}_n^{agg} = \sum_{m} \frac{w_{n,m}}{\sum_{m'} w_{n,m'}} \mathbf{F}_m$ (Eq. 9).
# 4. **Fine-tuning** — client $n$ receives $\mathbf{F}_n^{agg}$ and minimises
#    $\mathbb{E}_{(x,y)\sim D^t}\{\mathcal{L}_{CE}(f(x;\Omega_n), y) + \lambda^2 \mathcal{L}_{KL}(f(x;\Omega_n), \mathbf{F}_n^{agg})\}$ (Eq. 10).
#
# Models stay personal: nothing is averaged. **FedMD** (as KnFu describes it, Eq. 2) runs the same
# round but sends everyone the plain average $\frac{1}{N}\sum_m \mathbf{F}_m$. **Selective-FD**
# adds two filters: each client uploads soft labels only for transfer samples that look like its
# own data (a KuLSIF density ratio above its first quartile on held-out local data), and the
# server drops samples whose ensemble is ambiguous (high entropy). **Local** spends both phases
# on $D_n$. All four share one implementation of the round (the code: `fedkd_core/algorithms/shapes/transfer_kd.py`);
# they differ only in how a client fuses the soft labels it receives.

# %% [markdown]
# ## A worked example of the fusion weights
#
# One KnFu run (seed 0, MNIST, Dir(`example_alpha`), $|D_n|$ = `example_size`) for
# `example_rounds` rounds; we keep the weight matrix of the last round. Row $n$ is how client
# $n$ mixes everyone's soft labels. Beside it, each client's training labels. If the EPD works,
# a row's heavy off-diagonal entries sit on clients with similar label histograms.

# %% tags=["hide-input"]
example = knfu.fusion_example(params)
n_example = len(example.weights)
fig, axes = plt.subplots(1, 2, figsize=(plots.MAX_WIDTH, 4.4), gridspec_kw={"width_ratios": [1.15, 1]})
plots.weight_heatmap(example.weights, axes[0], title=f"row-normalised fusion weights, round {params.example_rounds}")
plots.label_bubbles(example.histograms, axes[1], title="training labels per client")
fig.tight_layout()
plots.caption(fig, f"From this page's own KnFu run ({n_example} clients, MNIST, Dir({params.example_alpha:g}), "
                   f"|D_n| = {params.example_size}, seed 0), not a committed record. Left: the fusion weights w_nm "
                   f"of round {params.example_rounds}, row n (client n's mix of everyone's soft labels) summing to 1. "
                   "Right: each client's training labels, client on x, class on y, a bubble's area proportional "
                   "to the count.")

# %% [markdown]
# The diagonal dominates by construction ($\beta = 10$). Off the diagonal, do the weights follow
# the true label distributions? We correlate each off-diagonal weight $w_{n,m}$ with the
# closeness $-\mathrm{KL}(q_n \| q_m)$ of the clients' *true* label histograms (Spearman), and count
# how often a client's heaviest neighbour is among its three truly closest clients.

# %% tags=["hide-input"]
agreement = knfu.neighbour_agreement(example.weights, example.histograms)
print(f"{n_example} clients; self weight on the diagonal: mean {np.diag(example.weights).mean():.2f}")
print(f"Spearman(w_nm, label-distribution closeness) = {agreement['spearman']:.2f}")
print(f"heaviest neighbour among the 3 truly closest: {agreement['heaviest_is_close']:.0%} "
      f"of clients (chance {agreement['chance']:.0%})")

# %% [markdown]
# ## The runs
#
# Every run is one configuration; a configuration that has run before is read from its stored
# record, not run again. Cells of the grid that already have paper-profile records (from the
# sweep) are taken from `results/paper/` and not run again, as long as this profile runs the paper
# profile's method: change a method setting (`-p lr 0.01`, `-p optimizer sgd`) and every cell runs
# anew and only those runs are shown. The committed records shown are the runs the verdicts read:
# MNIST and CIFAR-10 rerun with every method under the round schedule it
# chose on a validation split, and FedMD in its original form; the runs as first coded appear
# beside them in the section "Are the baselines as strong as the paper's?" below.

# %% tags=["hide-input"]
paper_records = knfu.reusable_paper_records(params)
if message := reuse_message(params, knfu.method_differences(params), reference="paper"):
    print(message)
configs = knfu.experiments_to_run(params, paper_records)
records = run_grid(configs, profile=params.profile, progress=False)
covered = {knfu.cell_of(r) for r in paper_records}
committed_shown = knfu.records_shown(paper_records)  # the runs the verdicts read, in the paper records' cells
records = [r for r in records if knfu.cell_of(r) not in covered] + committed_shown
finals = knfu.final_table(records)
print(f"{len(configs)} runs of profile '{params.profile}', {len(committed_shown)} committed paper-profile records; "
      f"{sum(r.timings['total_seconds'] for r in records):.0f} s of compute in the records shown")

# %% [markdown]
# ## Hyperparameters of the numbers shown
#
# What the paper states, what the records in the tables below used (read from the records
# themselves, whichever profile made them), and where the value comes from. The paper is silent
# on the number of rounds, the optimiser, the learning rate, $\lambda$, the fine-tuning schedule
# and how $d_{n,m}=0$ is handled; those are our choices and remain parameters.

# %% tags=["hide-input"]
used = lambda path, by=None: report.record_values(records, path, by)  # noqa: E731
tuned_runs = knfu.tuned_records()  # MNIST rerun under each method's chosen schedule (its own section below)
verdict_schedules = knfu.schedules_text(tuned_runs)
hyperparameters = pd.DataFrame([
    ("clients N", "20", used("data.num_clients"), "paper, Sec. IV-A"),
    ("Dir(α), MNIST / CIFAR-10", "0.1, 0.25, 0.5, 1 / 0.1, 0.5, 1", used("data.alpha", "data.dataset"), "paper, Tables 1-2"),
    ("|D_n|, MNIST / CIFAR-10", "50, 100, 200 / 500, 1000", used("data.samples_per_client", "data.dataset"), "paper, Tables 1-2"),
    ("transfer set K_t", "= |D_n|", "= |D_n| (IID from the training split, disjoint from clients)", "paper; drawing: ours"),
    ("local epochs E", "1", used("train.epochs"), "paper"),
    ("batch size", "8/16/32/64/128 for |D_n| = 50/100/200/500/1000", used("train.batch_size"), "paper"),
    ("β (Eq. 8)", "10", used("algorithm_params.beta"), "paper"),
    ("λ (Eq. 10)", "not given (called a temperature in Eq. 2, a balance weight in Eq. 10)",
     f"{used('algorithm_params.lam')}: balance weight, loss CE + λ²·KL(F_agg ‖ f) at temperature 1", "ours"),
    ("CE term of Eq. 10", "on D^t (formula) / 'on the local dataset' (prose)", "on the labelled D^t", "ours (formula)"),
    ("fine-tuning epochs on D^t", "not given", used("algorithm_params.finetune_epochs"), "ours"),
    ("rounds R", "not given", used("rounds", "data.dataset"), "ours"),
    ("optimiser, lr", "not given", f"{used('train.optimizer')}, {used('train.lr')} (optimiser kept or fresh per phase, digest lr: the next row)", "ours"),
    ("round schedule behind the verdicts (optimiser/digest lr/revisit epochs)", "not given",
     verdict_schedules or "no tuned rerun committed", "ours: chosen per method on a validation split of the clients' "
     "own data, MNIST; CIFAR-10 reuses MNIST's choice"),
    ("d_nm = 0 (Eq. 7)", "not handled", "d clamped to ≥ 1e-6; max in Eq. 8 over m ≠ n", "ours"),
    ("Selective-FD client selector", "KuLSIF, first quartile", "KuLSIF on raw pixels, σ = 5·√(d/784), fit on ½ of D_n, quartile on the other ½", "official code, adapted"),
    ("Selective-FD server selector", "entropy threshold (value not found)", f"H(ŷ) ≤ {used('algorithm_params.entropy_threshold')}·ln C", "ours"),
    ("local test set", "not defined", f"{used('data.local_test_size')} test images per client, client's class proportions", "ours"),
    ("precision", "—", ", ".join(sorted({report.record_precision(r) for r in records})) or "—", "ours (see results/README.md)"),
], columns=["hyperparameter", "paper", "records shown", "source"])
tables.show(hyperparameters)
profiles_shown = sorted({r.profile for r in records})
if profiles_shown != [params.profile]:
    display(Markdown(f"This page was executed with the **{params.profile}** profile, but the numbers below come from "
                     f"records of the **{', '.join(profiles_shown)}** profile(s) wherever those cover a cell: the table "
                     "gives the records' settings; the parameters table above gives the executing profile's."))

# %% [markdown]
# ## Table 1 and Table 2: ALMA (%) beside the paper
#
# Each cell: ours (final round, mean ± std over seeds), the paper's mean ± std over its runs and
# the difference; the caption names the profile and seeds; "not run" marks cells outside it.

# %% tags=["hide-input"]
keys = ["dataset", "alpha", "size", "algorithm"]
ours = report.mean_std(finals, keys, "alma")
paper = pd.concat([knfu.paper_table1(), knfu.paper_table2()], ignore_index=True)
comparison = report.compare_with_paper(ours, paper, keys)
comparison["algorithm"] = comparison["algorithm"].map(knfu.METHODS)
cifar_tuned_runs = knfu.tuned_cifar_records()  # the CIFAR-10 rerun under tuned schedules (its own section below)
cifar_on_rerun = knfu.profile_complete(knfu.TUNED_CIFAR_PROFILE, cifar_tuned_runs)
cifar_judged = ("CIFAR-10 on its rerun under the schedules tuned on MNIST" if cifar_on_rerun
                else "CIFAR-10 on its own once every run of it is committed")
for dataset, title in (("mnist", "Table 1 (MNIST)"), ("cifar10", "Table 2 (CIFAR-10)")):
    shown = ours[(ours.dataset == dataset) & ours.algorithm.isin(paper.algorithm)]  # the methods the table lays out
    if shown.empty:
        continue
    profiles = "+".join(sorted(set("+".join(shown["profile"]).split("+"))))
    schedules = knfu.schedules_text([r for r in records if r.config["data"]["dataset"] == dataset])
    judged_here = ("the records the verdict box judges" if committed_shown else
                   "this page's own runs; the verdicts judge the committed paper-scale records")
    display(Markdown(f"**{title}**, as the paper lays it out: settings as rows, methods as columns. Profile "
                     f"{profiles}, {knfu.tables.seeds_text(shown)}: {judged_here}. Round schedules {schedules} "
                     f"(written optimiser/digest lr/revisit epochs: `{knfu.DEFAULT}` is the round as first coded, a fresh "
                     "optimiser per phase, the digest at the local lr, no revisit); the verdicts judge MNIST on its rerun "
                     f"under the tuned schedules, and {cifar_judged}; the runs as first coded are "
                     "[below](#are-the-baselines-as-strong-as-the-paper-s-the-round-s-schedule-tuned), beside these."))
    display(HTML(tables.paper_layout(comparison[comparison.dataset == dataset], ["alpha", "size"], ["algorithm"],
                                     method="algorithm", names={"alpha": "α", "size": "|D_n|", "algorithm": ""})))

# %% [markdown]
# ## The claims, cell by cell
#
# Each claim's effect in every cell of the records the verdict box judges (MNIST rerun under the
# tuned schedules, CIFAR-10 rerun under the schedules tuned on MNIST: committed records, whatever
# this page's profile), with each
# cell's own word from its 95% t-interval over seeds: ✓ holds, ✗ reversed, · inconclusive (one seed
# is always inconclusive), ○ left out of the verdict by the convergence gate (a method still rising
# at R, which the paper does not give). First on the final round, as the verdict; then on each
# run's best round. The tables above show the same records.

# %% tags=["hide-input"]
ran = ours[["dataset", "alpha", "size"]].drop_duplicates()
paper_ran = paper.merge(ran, on=["dataset", "alpha", "size"])
cells_shown = pd.concat([ledger.show_cell_verdicts(knfu, runs, label=label) for label, runs in knfu.verdict_bases()],
                        ignore_index=True)

# %% [markdown]
# ## Fig. 3 and Fig. 4: learning curves
#
# ALMA per round, mean over seeds with a ± 1 std band. Fig. 3 fixes $\alpha = 0.5$ and varies
# $|D_n|$; Fig. 4 fixes $|D_n| = 100$ and varies $\alpha$. Panels show whichever of those cells
# the records shown cover (MNIST; each caption names their profile); below them, every CIFAR-10
# cell (the paper shows none). Beside the paper's four methods, a fifth line is FedMD in its
# original form, its authors' schedule; a caption's range of seeds is its doing where it has fewer.

# %% tags=["hide-input"]
history = knfu.history_frame(records)
mnist = history[history.dataset == "mnist"]


def curve_panels(frame, panels, title):
    if not panels:
        print(f"{title}: no runs in this profile")
        return
    fig, axes = plots.grid(len(panels), height=3.3)
    for ax, (alpha, size) in zip(axes, panels):
        plots.learning_curves(frame[(frame.alpha == alpha) & (frame["size"] == size)], ax,
                              hue="method", title=f"α = {alpha:g}, |D_n| = {int(size)}", highlight="KnFu")
    fig.suptitle(title)
    plots.legend_below(fig, axes[0])
    drawn = frame[[cell in panels for cell in zip(frame.alpha, frame["size"])]]
    seeds_text = plots.seeds_text(drawn, ["alpha", "size", "method"])
    plots.caption(fig, "ALMA (%) at each evaluated round, a line per method, a panel per cell (α, |D_n|) of the "
                       f"records shown (profile {', '.join(sorted(drawn.profile.unique()))}): the line is the mean "
                       f"over the method's seeds ({seeds_text}), the band ± 1 std over them (none with one seed).")


cells = mnist[["alpha", "size"]].drop_duplicates()
curve_panels(mnist, sorted((a, s) for a, s in cells.values if a == 0.5), "Fig. 3: α = 0.5")
curve_panels(mnist, sorted((a, s) for a, s in cells.values if s == 100), "Fig. 4: |D_n| = 100")
cifar = history[history.dataset == "cifar10"]
curve_panels(cifar, sorted(map(tuple, cifar[["alpha", "size"]].drop_duplicates().values)), "CIFAR-10, every cell")

# %% [markdown]
# ### KnFu's lead, seed by seed
#
# On a 40–95% axis a lead of a fraction of a point cannot be seen. Below, for the cells of Figs. 3–4
# (MNIST) and every CIFAR-10 cell: KnFu's final ALMA minus each other method's, per seed (the runs of
# a cell and seed share their partition and initialisation, so the difference is paired), with its
# mean and 95% interval over seeds, around 0. Each method has its own panel and scale. A cell's
# interval is the cell alone; the verdict box pools the cells.

# %% tags=["hide-input"]
differences = knfu.paired_differences(finals)
for dataset, title in (("mnist", "MNIST, the cells of Figs. 3–4: KnFu minus each method"),
                       ("cifar10", "CIFAR-10, every cell: KnFu minus each method")):
    on = differences[differences.dataset == dataset]
    shown_cells = sorted({(a, s) for a, s in zip(on.alpha, on["size"]) if dataset != "mnist" or a == 0.5 or s == 100})
    fig = knfu.plot_paired_differences(on, shown_cells, title)
    if fig is None:
        print(f"{title}: no cell with KnFu and another method on the same seed in the records shown")
        continue
    plots.caption(fig, knfu.paired_caption(on, shown_cells))

# %% [markdown]
# ## Communication per round
#
# Bytes counted from the messages themselves (per client and round): a sharing method uploads
# $K_t \times C$ float32 soft labels and downloads as many; Selective-FD sends only the selected
# rows plus a one-byte-per-sample mask each way; Local sends nothing. For scale, the last column
# is what one FedAvg exchange of the same model would cost (parameters down and up).

# %% tags=["hide-input"]
communication = knfu.communication_table(records)
model_bytes = {dataset: 4 * sum(p.numel() for p in make_model(
    knfu.MODEL_FOR[dataset], InputShape(*shape), seed=0).parameters())
    for dataset, shape in (("mnist", (1, 28, 10)), ("cifar10", (3, 32, 10)))}
communication["FedAvg up+down (KB)"] = communication["dataset"].map(model_bytes) * 2 / 1e3
tables.show(communication.rename(columns={"size": "|D_n|"}), digits=1)

# %% [markdown]
# ## Beside the paper, in numbers
#
# Computed from the records the tables above show, and from FedMD in its original form (the paper's
# tables have no column for it; its runs are in the table at the end of the tuning section): it is
# ranked with the others only where it has as many seeds in every cell, otherwise set beside them on
# its own cells and seeds, which the lines name. The verdicts are in the box at the top.

# %% tags=["hide-input"]
display(Markdown(report.markdown_list(knfu.verdict(ours, paper_ran))))

# %% [markdown]
# ## Are the baselines as strong as the paper's? The round's schedule, tuned
#
# As first coded, over the paper-profile cells, FedMD and Selective-FD ran below the paper on average
# while KnFu ran above it; rerun under the tuned schedules below, every method runs at or above the
# paper on average, the baselines most (the line under each rerun table gives both gaps). No coding error we could
# find explains it; the *schedule* of the round does. As first coded, every phase starts a fresh Adam at lr 1e-3 and a
# client is scored right after one epoch of distillation on the transfer set; at small α that
# digest flips many of a client's local predictions. The official FedMD keeps each client's Adam
# across rounds, digests the averaged *logits* with an L1 loss and then *revisits* the client's own
# data before it is scored; Selective-FD's demo keeps one optimiser throughout.
#
# So every method of the paper gets the same tuning budget over three schedule choices
# (the code: `fedkd_core/algorithms/shapes/schedule.py`): the optimiser **fresh** per phase or **kept** per client,
# the digest's learning rate (the local update's, written `-`, or 0.0001) and 0 or 1 **revisit** epoch after the
# digest, written *optimiser/digest lr/revisit epochs* (`fresh/-/0` is the round as first coded). The eight
# schedules run in the tuning cells (MNIST, |D_n| = 100, α ∈ {0.1, 0.5, 1}, seed 0, the paper
# profile otherwise), each client training on 80% of its data and scored on the 20% held out:
# the choice never sees the test data. Each method keeps the schedule with the best mean
# validation ALMA (`notebooks/params/tuning/knfu.yaml`; the table lists each method's best first).

# %% tags=["hide-input"]
tuning_runs = knfu.tuning_records()
tuning = knfu.tuning_table(tuning_runs)
if tuning.empty:
    display(Markdown("No tuning records committed yet: run `python -m fedkd_core.sweep knfu --params "
                     "notebooks/params/tuning/knfu.yaml --workers 2`."))
else:
    tables.show(tuning.drop(columns="algorithm"), digits=1,
                legend="Validation ALMA (%) at the last round, seed 0, on the held-out 20% of each client's data.")
    chosen = knfu.chosen_schedules(tuning_runs)
    display(Markdown(f"{len(tuning_runs)} of {len(knfu.experiments(knfu.TUNING_PROFILE))} tuning runs committed. "
                     + ("Chosen: " + ", ".join(f"{knfu.METHODS[m]} `{s}`" for m, s in sorted(chosen.items()))
                        if chosen else "No method has all eight schedules run yet: no choice is made.")))

# %% [markdown]
# **Table 1 rerun under the chosen schedules.** Every MNIST cell of the paper profile, 3 seeds, each
# method under the schedule it chose above (`notebooks/params/paper/knfu_tuned.yaml`), beside the
# same cells and seeds as first coded and the paper's Table 1. Then each claim judged both ways
# on the same cells and seeds: the verdict box at the top and the Claims page judge MNIST on the
# tuned runs (rows marked "(MNIST, schedules tuned)"), and KnFu tuned against FedMD in its original
# form, its authors' own schedule, on the same cells and seeds ("(MNIST, KnFu tuned)"). CIFAR-10
# (Table 2) has its own rerun, below.

# %% tags=["hide-input"]
coded_runs = paper_records or knfu.paper_profile_records()  # the committed records, whatever this run's method
if not tuned_runs:
    display(Markdown("No tuned-schedule records committed yet: run `python -m fedkd_core.sweep knfu --params "
                     "notebooks/params/paper/knfu_tuned.yaml --workers 2`."))
else:
    rerun = knfu.schedule_table(coded_runs, tuned_runs)
    tables.show(rerun.drop(columns="dataset"), digits=1, settings=["alpha"],
                legend="Final ALMA (%), mean over the seeds run under both schedules; the paper's Table 1 beside.")
    display(Markdown(knfu.schedule_gaps(rerun)))
    changes = knfu.verdict_changes(coded_runs, tuned_runs)
    tables.show(changes, legend="Each claim on the same cells and seeds, as coded and tuned (effect in points, "
                                "95% interval), every cell counted on both sides; \"converged in both\": the cells "
                                "the convergence gate would keep (as coded, most runs are still rising at R = 15). "
                                "The verdict box at the top counts only the cells its gate keeps, so its effect and "
                                "the paper's for the same claim can differ from the tuned column here.")
    changed = changes[changes["verdict changed"] == "yes"].claim.tolist()
    display(Markdown(f"{len(tuned_runs)} of {len(knfu.experiments(knfu.TUNED_PROFILE))} tuned runs committed. "
                     + (f"Verdicts that change with the schedule: {', '.join(changed)}." if changed
                        else "No verdict changes with the schedule on these cells.")))

# %% [markdown]
# **Table 2 rerun under the same schedules.** Every CIFAR-10 cell of the paper profile, 3 seeds, each
# method under the schedule it chose on MNIST's validation split, not re-tuned on CIFAR-10
# (`notebooks/params/paper/knfu_tuned_cifar10.yaml`: the same budget for every method, so an equal
# comparison, though not each method's best on CIFAR-10). With all of its runs committed, the
# verdict box and the Claims page judge these runs ("(CIFAR-10, schedules tuned on MNIST)"); while
# any is missing they keep CIFAR-10's rows as coded ("(CIFAR-10, as coded)"), measured and marked
# "not judged: unequal tuning". The runs are shown here beside the same cells and seeds as first
# coded and the paper's Table 2.

# %% tags=["hide-input"]
cifar_planned = len(knfu.experiments(knfu.TUNED_CIFAR_PROFILE))
if not cifar_tuned_runs:
    display(Markdown(f"0 of {cifar_planned} runs committed yet: run `python -m fedkd_core.sweep knfu --params "
                     "notebooks/params/paper/knfu_tuned_cifar10.yaml --workers 2`."))
else:
    cifar_rerun = knfu.schedule_table(coded_runs, cifar_tuned_runs)
    tables.show(cifar_rerun.drop(columns="dataset"), digits=1, settings=["alpha"],
                legend="Final ALMA (%), mean over the seeds run under both schedules; the paper's Table 2 beside.")
    display(Markdown(knfu.schedule_gaps(cifar_rerun)))
    complete = cifar_on_rerun
    cifar_changes = knfu.verdict_changes(coded_runs, cifar_tuned_runs)
    tables.show(cifar_changes, legend="Each claim on the same CIFAR-10 cells and seeds, as coded and under the schedules "
                                      "tuned on MNIST (effect in points, 95% interval), every cell counted on both "
                                      "sides; \"converged in both\": the cells the convergence gate would keep. The "
                                      "verdict box at the top counts only the cells its gate keeps, so its effect and "
                                      "the paper's for the same claim can differ from the tuned column here."
                                      + ("" if complete else " Partial: only the cells and seeds run so far."))
    changed = cifar_changes[cifar_changes["verdict changed"] == "yes"].claim.tolist() if len(cifar_changes) else []
    judged_on = "the verdicts read these runs" if complete else "the verdicts wait for all of them"
    display(Markdown(f"{len(cifar_tuned_runs)} of {cifar_planned} runs committed; {judged_on}. "
                     + (f"Verdicts that change with the schedule{'' if complete else ', so far'}: {', '.join(changed)}."
                        if changed else "No verdict changes with the schedule on these cells.")))

# %% [markdown]
# **FedMD in its original form** on Table 1's cells (`notebooks/params/paper/knfu_fedmd_original.yaml`)
# and Table 2's (`notebooks/params/paper/knfu_fedmd_original_cifar10.yaml`), every cell, 3 seeds. The
# paper's tables have no column for it, so its runs are here, per cell, beside KnFu's and FedMD's of
# the tables above and the paper's FedMD. The verdict box and the Claims page judge "KnFu > FedMD as
# its authors run it (CIFAR-10, KnFu's schedule chosen on MNIST)" against KnFu's runs of the rerun
# above, on the same cells and seeds, once all of its CIFAR-10 runs are committed.

# %% tags=["hide-input"]
original_cifar = knfu.originals_on(coded_runs, "cifar10")
planned = len(knfu.experiments(knfu.FEDMD_ORIGINAL_CIFAR_PROFILE))
judged = ("the verdicts read them" if knfu.profile_complete(knfu.FEDMD_ORIGINAL_CIFAR_PROFILE, original_cifar)
          else "the claim is judged once all of them are")
display(Markdown(f"FedMD in its original form on CIFAR-10: {len(original_cifar)} of {planned} runs committed; {judged}"
                 + ("." if original_cifar else ": run `python -m fedkd_core.sweep knfu --params "
                    "notebooks/params/paper/knfu_fedmd_original_cifar10.yaml --workers 2`.")))
originals = knfu.tables.originals_beside(ours, paper)
if len(originals):
    tables.show(originals.rename(columns={"size": "|D_n|"}), digits=1, settings=["alpha"],
                legend="Final ALMA (%): FedMD in its original form (mean ± std over its seeds), beside the means of "
                       "KnFu and FedMD in the tables above (each method over its own seeds) and the paper's FedMD; "
                       "the last column is KnFu's mean minus the original form's, not a verdict (the verdict box "
                       "pairs runs by seed).")

# %% [markdown]
# ## Earlier design: robustness to what the paper leaves open
#
# *Folded: this grid runs the round as first coded, not the tuned schedules the verdicts use; open
# the output below to read it.*
#
# The verdict above rests on one reading of each choice the paper does not fix: KnFu's paper names no optimiser, learning rate, round budget R or Selective-FD threshold, and fixes λ and the fine-tuning epochs without a search. The
# robustness grid (its variants are listed in `fedkd_core/chapters/knfu/robustness.py`) reruns the claims'
# cells (MNIST at |D_n| = 100, α ∈ {0.1, 0.5, 1}, 3 seeds, the paper profile otherwise) once per alternative reading; the first variant is the grid's base reading, the paper profile's settings with the round as first coded (not the tuned schedules the verdict box uses).
# They are a subset of the chapter's, so its verdicts can differ from the box at the top: "Local ≥
# sharing at smallest α, largest |D_n|" reads α = 0.1 at |D_n| = 100 here, not the paper's largest
# |D_n|, and the schedules are the round as first coded. For each
# variant and claim: its verdict with the pooled effect in points and its 95% interval (`low`,
# `high`), the cells where it holds and where it is reversed, and the spread over seeds. Variants
# appear as their runs are committed
# (`python -m fedkd_core.sweep knfu --params notebooks/params/robustness/knfu.yaml --robustness
# --workers 2`); the [Claims page](claims.ipynb) gathers all four chapters.

# %% tags=["hide-input", "hide-output"]
from fedkd_core.chapters import robustness  # noqa: E402

robustness_table = robustness.show(knfu, "knfu")

# %% [markdown]
# **Is Selective-FD crippled by our threshold?** The paper gives no value for Selective-FD's server
# filter (keep a transfer sample when its ensemble's entropy is at most τ·ln C) and the official
# code has none. Per threshold of the grid: the share of the transfer set some client's KuLSIF
# selector accepted, the share the server then kept (what every client distils on), Selective-FD's
# ALMA and KnFu's lead over it, over the same cells and seeds. Fractions come from records run since
# they were stored (`runs with fractions`).

# %% tags=["hide-input"]
tables.show(knfu.selective_fd_filter_table(), digits=1)
