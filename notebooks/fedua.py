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
# # FedUA: uncertainty-aware ensemble distillation
#
# FedUA (Lee and Wu) claims that weighting each teacher by how familiar a sample is to it, and
# distilling only where the teachers disagree, beats FedDF's plain ensemble distillation under
# label skew.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
partitions = "step"
algorithms = "fedavg,feddf,fedua"
participations = "1.0"
table1_ratios = "0.5"
table1_selections = "random,bald"
seeds = 1
model = "cnn5"
num_clients = 4
pool_size = 400
transfer_size = 100
major_fraction = 0.8
rounds = 2
local_epochs = 1
batch_size = 32
lr = 0.01
local_lr_decay = "0.3,0.6"
momentum = 0.9
weight_decay = 0.0002
augment = "crop_flip"
server_epochs = 1
server_batch_size = 128
server_lr = 0.001
temperature = 1.0
sample_ratio = 0.6
weighting = "density"
density_temperature = 1.0
local_test_size = 50
global_test_size = 200
eval_every = 1
mixed_precision = "auto"
reuse_reduced = True

# %% tags=["remove-input"]

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from fedkd_core import plots, report, tables
from fedkd_core.chapters import fedua as chapter
from fedkd_core.chapters import notebook_params, reuse_message
from fedkd_core.federation import build_federated_data
from fedkd_core.results import run_grid

params = notebook_params(chapter.Params, globals())
plots.use_book_style()

# %% [markdown]
# ## Verdict

# %% tags=["remove-input"]
from fedkd_core.chapters import ledger  # noqa: E402

verdict_rows = ledger.verdict_box(chapter)  # its caveat under it: chapter.read_at_scale(), with the ladder's finding

# %% [markdown]
# **What the verdicts rest on.** The committed reduced-profile records (their scale is under the
# box). A cell whose runs were still rising at the end of the reduced profile, or were evaluated
# fewer than 10 times, does not count: a claim with no cell left is *untested at this scale*, with
# the reason. The tables further down show the committed reduced-profile records wherever they
# cover a cell, and this page's own profile's runs elsewhere (each table names its profile).

# %% [markdown]
# The caveat under the box is the one the landing page and the Claims page show beside FedUA's
# verdicts. Table 2 below sets FedDF's gain over FedAvg beside the paper's, which shows how much the
# distillation step does at all at this scale; the ladder next tries the paper's server budget.

# %% [markdown]
# ## Does the paper's server budget close the gap? The ladder
#
# FedDF and FedUA differ from FedAvg only in the server's distillation, and the reduced profile
# gives it 1 epoch per round where the paper gives 20. So before reading any verdict as a
# statement about the paper's method, one cell of Table 2 (step partition, C = 1, 3 seeds) ran
# FedDF and FedUA at 1, 5 and 20 server epochs, everything else unchanged; FedAvg, which has no
# server step, is every rung's baseline, paired seed by seed. At 20 epochs FedUA also ran under
# the two other readings of its lost Eqs. 1-2b that the code has, each fixed by a rule stated
# in advance, never by a test score.

# %% tags=["remove-input"]
from fedkd_core.chapters.fedua import ladder  # noqa: E402

ladder_runs = ladder.ladder_runs()
if ladder.missing_text(ladder_runs):
    display(Markdown(ladder.missing_text(ladder_runs)))
if ladder_runs.accuracy.notna().any():
    display(Markdown(f"**What the ladder shows.** {ladder.ladder_finding(ladder_runs)}"))
    plots.caption(ladder.plot_ladder(ladder_runs),
                  "Gain of FedDF and FedUA over FedAvg (final global accuracy, points) against the server's "
                  "epochs per round, step partition, C = 1: each seed's paired gain (faint) and the mean with "
                  "its 95% t interval; at 20 epochs FedUA's other two readings; dashed: the paper's gains at 20 "
                  "epochs (its Table 2).")
    tables.show(ladder.ladder_table(ladder_runs), legend="The ladder, seed by seed (FedUA as reconstructed, τ = 1).")
    tables.show(ladder.readings_table(ladder_runs),
                legend=f"FedUA − FedDF at {ladder.RUNGS[-1]} server epochs under each reading of the lost "
                       "equations, paired by seed (95% t interval over 3 seeds).")

# %% [markdown]
# **What this means for the verdicts.** More server distillation does not bring FedDF's gain
# towards the paper's: at this design the ensemble of client models has little to teach the
# average that the average does not already know. FedUA as reconstructed (τ = 1) gets *worse*
# the longer it distils: its weights are near one-hot (the diagnostics below), so each sample's
# target is one teacher's, and the student fits those targets more closely the longer it trains.
# The two softer readings bring FedUA back to FedDF's level, not above it. The server's budget
# therefore does not explain the gap to the paper, and the reduced profile was not rerun at 20
# server epochs. What else differs from the paper and could: **local epochs** (2 here, 20 in the
# paper: with 20, client models drift much further from the average, which is when an ensemble
# of them has most to add; untested here), **the model** (the 5-layer CNN here, ResNet-32 with
# batch normalisation in the paper, whose averaged statistics FedDF's authors found distillation
# repairs) and **the data** (20,000 client images here, 40,000 in the paper, so a minor class of
# the step split has 0-5 images on a client where the paper has 10). The ladder's runs ran on an
# NVIDIA H200 (18 at once), the 1-epoch rung and FedAvg on an AMD EPYC Zen 4 CPU; all in fp32.

# %% [markdown]
# ## The paper and this reproduction
#
# FedDF-style methods average the clients' models and then distil the *ensemble* of client models
# into the average on unlabelled server data. Lee and Wu observe that under label skew each
# client model is only competent on the classes it has seen, so a plain average of the teachers'
# logits mixes experts with guessers. **FedUA** weighs every teacher, sample by sample, by how
# familiar the sample is to that teacher (the density of its features under a Gaussian model of
# the teacher's own training features, a *Gaussian discriminant analysis*, GDA) and distils only
# the samples on which the teachers disagree most (*Bayesian active learning by disagreement*,
# BALD: the mutual information between a sample's label and the choice of teacher). This chapter implements FedUA and its two baselines, runs the paper's
# three tables at a reduced scale, and sets our numbers beside the paper's. The clients' data
# follow the paper's *partitions*: **step** (each client holds two major classes with most of its
# images and a few of every other class) and **Dirichlet** Dir(α) label skew (each client's class
# shares drawn from a Dirichlet distribution; the smaller α, the more skewed).

# %% tags=["remove-input"]
from fedkd_core.chapters import card  # noqa: E402

card.show_citation("fedua")

# %% [markdown]
# | | |
# |---|---|
# | **Reproduces** | Table 1 (sample selection), Table 2 (partitions), Table 3 (participation), Figs. 7/14 (splits), 10/11 (uncertainty maps), 13 (learning curves) |
# | **Methods** | FedAvg, FedDF (FedBE's "vanilla distillation", as FedUA describes it), FedUA (`fedkd_core/algorithms/feddf.py`, `fedua.py`) |
# | **Data** | CIFAR-10: client images and a disjoint unlabelled server set U in the paper's 4 : 1 ratio; the whole CIFAR-10 test set scores the global model |
# | **Partitions** | FedBE's step (2 major classes per client, 98% of its images), Dir(0.1), Dir(0.5) |
# | **Metric** | accuracy of the global (student) model on the test set after the last round, mean ± std over seeds |
# | **Profiles** | smoke (defaults below, seconds, CI); quick (`make book`); **reduced** (the 5-layer CNN, 20,000 + 5,000 images, 40 rounds of 2 + 1 epochs with FedBE's local lr decay, evaluated every round, 3 seeds: its records are committed and shown in every profile); paper (ResNet-32, 40,000 + 10,000 images, 40 rounds of 20 + 20 epochs, 5 seeds: GPU work) |

# %% [markdown]
# ## Reproduce this chapter

# %% tags=["remove-input"]
reproduce_times = card.reproduce_box("fedua")

# %% [markdown]
# The parameters this page was executed with:

# %% tags=["remove-input"]
tables.show(report.parameters_table(params))

# %% [markdown]
# ## The method
#
# A round of FedUA (paper §3, Fig. 6), with $K$ selected clients:
#
# 1. **Clients** receive the global model, train $E$ epochs of SGD with cross-entropy on their
#    data $D_k$, and fit a *Gaussian discriminant analysis* of their own penultimate features
#    $z = f_k(x)$: for each class $c$ they hold, the mean $\mu_{kc}$, the covariance
#    $\Sigma_{kc}$ and the prior $q_k(c) = N_{kc}/N_k$ (Eq. 1). They upload model and GDA.
# 2. **The server** averages the uploads (FedAvg) into the *student*, runs the unlabelled set $U$
#    through every upload (the *teachers*), and scores each sample under each teacher's density
#
#    $$p_k(z) = \sum_{c:\,N_{kc}>0} q_k(c)\,\mathcal{N}(z;\mu_{kc},\Sigma_{kc}) \qquad\text{(Eq. 2a)}$$
#
#    at $z = f_k(x)$. The teachers' weights on sample $x$ are these densities normalised across
#    teachers, $w_k(x) = p_k(f_k(x)) / \sum_j p_j(f_j(x))$ (Eq. 2b), and the target is the
#    softmax of the weighted logits, $t(x) = \mathrm{softmax}\big(\sum_k w_k(x)\,\ell_k(x) / T\big)$.
# 3. **Sample assessment** keeps the share SR of $U$ with the highest BALD score, the mutual
#    information between the label and the teacher (Eqs. 3–4), with $p^t$ teacher $t$'s softmax:
#
#    $$I(x) = -\sum_c \bar p_c \log \bar p_c + \frac{1}{K}\sum_{t,c} p^t_c \log p^t_c, \qquad \bar p_c = \frac1K \sum_t p^t_c.$$
#
# 4. **Student learning**: the student minimises $\mathrm{KL}\big(t(x)\,\|\,\mathrm{softmax}(s(x)/T)\big)$
#    on the kept samples for $E_s$ epochs of SGD and becomes the next global model.
#
# FedDF is the same round with $w_k = 1/K$ and all of $U$; FedAvg stops after the average.
#
# **What is reconstructed.** Eqs. 1, 2a and 2b were lost in the paper's text extraction (the
# prose survives: "Gaussian discriminant analysis for each client", "normalised density"). The
# GDA fit and mixture density follow DDU (Mukhoti et al.), which the paper builds on; the
# normalisation across teachers is our reading of "normalised". With features in 84
# dimensions (the 5-layer CNN's; 64 for the paper's ResNet-32), densities of different teachers differ by many nats, so these weights are close
# to one-hot — the diagnostics below measure how close. The GDA needs care where a client has
# few images of a class: a class with one image takes the client's pooled covariance, and one
# jitter (the smallest of $0, 10^{-12}, \dots, 1$ times the mean feature variance that makes every
# covariance factorable) is added to all classes, in float64.
#
# The choices the paper leaves open, read from the code's configs, for the reduced profile (its
# committed records give every number on this page) and, where it differs, the profile this page
# executed:

# %% tags=["hide-input", "nbval-check-output"]
choice_columns = chapter.choices_columns(params)
tables.show(chapter.open_choices_table(params), settings=["paper", *choice_columns])

# %% [markdown]
# ## The splits (Figs. 7 and 14)
#
# Class counts per client for each partition, seed 0, of this page's profile and of the reduced
# profile, whose committed records the results tables show; each panel is titled with its
# partition and profile, and bubble areas are relative to the largest count of their panel.
# FedBE's step split gives every client two major classes (each class is major for exactly two
# clients) and a handful of images of every other class; at the paper's scale that is 1,960 +
# 1,960 + 8 × 10 images.

# %% tags=["hide-input"]
shown_profiles = chapter.profiles_shown(params)
partition_names = chapter.partition_names(params)
panels = [(heading, profile_params, name) for heading, profile_params in shown_profiles.items()
          for name in chapter.partition_names(profile_params)]
per_row = max(len(chapter.partition_names(p)) for p in shown_profiles.values())
fig, axes = plots.grid(len(panels), height=3.2, per_row=per_row)
for ax, (heading, profile_params, name) in zip(axes, panels):
    split = build_federated_data(chapter.data_config(profile_params, name), seed=0)
    plots.label_bubbles(split.train_histograms(), ax, title=f"{name}, {profile_params.profile}")  # short: fits the column
fig.tight_layout()
plots.caption(fig, "A panel per partition and profile (its title), computed here from the split (seed 0), not read "
                   "from records: client on x, class on y, a bubble's area proportional to that client's training "
                   "images of that class (relative to the panel's largest count).")
step_rows = chapter.step_checks(shown_profiles)
if len(step_rows):
    display(Markdown("The step split's images per client and per class, per profile:"))
    tables.show(step_rows, digits=3)

# %% [markdown]
# ## Runs
#
# This profile's grid runs here (a configuration that has run before is read from its stored
# record, not run again). Cells that the committed records of the **reduced** profile
# cover are shown from those records instead, in every profile, as long as this profile runs the
# reduced profile's method (same model, optimisers, server settings; only the scale differs) and
# `reuse_reduced` is on. Change a method setting (`-p server_lr 0.01`) and every cell runs anew.
# Each table names the profile, the seeds and the rounds behind each row.

# %% tags=["hide-input"]
reduced_records = chapter.reduced_profile_records()
runs = run_grid(chapter.experiments_to_run(params, reduced_records), profile=params.profile, progress=False)
records = list({r.key: r for r in reduced_records + runs}.values())
if message := reuse_message(params, chapter.method_differences(params)):
    print(message)
ours = chapter.summary(records)
print(f"{len(runs)} runs of this profile ({params.profile}), {len(reduced_records)} records of the reduced profile; "
      f"{sum(r.timings['total_seconds'] for r in records):.0f} s of compute in their records")

# %% [markdown]
# ## Table 2: accuracy under different partitions
#
# Global accuracy after the last round (%), C = 1, beside the paper's (ResNet-32, 40 rounds).
# Our reduced runs train a smaller network on half the data with far fewer epochs per round, so
# their accuracies are below the paper's; what can be compared is the *ordering* of the methods
# and the relative changes below. Methods are only ever compared within one profile: a row says
# which profile, how many seeds and how many rounds produced it.
#
# **What the reduced profile keeps and changes.** It keeps the paper's 40 rounds, 10 clients, the
# three splits, the 4 : 1 ratio of client to server images, the optimisers and FedBE's local lr
# schedule (×0.1 at 30% and 60% of the rounds), and evaluates every round, so the convergence gate
# can read each run's last 20%. It changes the network (the 5-layer CNN, 62k parameters, for
# ResNet-32's 0.46M), the data (20,000 client and 5,000 server images for 40,000 and 10,000) and
# the epochs per round (2 local and 1 server for 20 and 20), and runs 3 seeds for "more than
# five". A first reduced design (ResNet-8, 4,000 + 1,000 images, 10 rounds of 3 + 3 epochs,
# evaluated 5 times) left FedAvg at 22-40%, still rising, so no claim could be judged on it; this
# one was chosen so that FedAvg reaches at least 0.6 × the paper's accuracy in every Table 2
# column and levels off (the yaml `notebooks/params/reduced/fedua.yaml` records the trial). The
# plateau is the schedule's: after 60% of the rounds the local lr is 1e-4. The step split keeps 98%
# of each client's images in its two majors, so a minor class has at most 5 images per client
# (the paper's clients have 10; the table under the splits gives the counts): a minor class with
# one image takes the client's pooled GDA covariance, and the density weighting works on coarser
# class models than the paper's. With 10 images per minor class and 64-d features, the paper's
# minor-class covariances were rank-deficient too and needed a regularisation the paper does not
# state; the diagnostics below count the jitter each of our fits needed.
#
# What the design had to reach, checked on the committed reduced records (FedAvg, C = 1):

# %% tags=["hide-input"]
design = chapter.plateau_check(reduced_records)
if len(design):
    tables.show(design, digits=1)
    display(Markdown(f"FedAvg reaches 0.6 × the paper's accuracy in {int(design['reaches it'].sum())} of {len(design)} "
                     f"columns and levels off (mean late gain below 1 point) in {int(design['below 1'].sum())}."))
else:
    display(Markdown("No committed reduced-profile FedAvg record is found (`results/reduced/`)."))

# %% tags=["hide-input"]
KEYS_T2, KEYS_T3, KEYS_T1 = ["partition", "algorithm"], ["participation", "algorithm"], ["selection", "ratio"]


t2_ours = report.mean_std_per_profile(chapter.table2_rows(ours), KEYS_T2, "global_acc")
table2 = report.show_comparison(t2_ours, chapter.paper_table2(), KEYS_T2, "Table 2 — C = 1", {"algorithm": chapter.METHODS},
                                baseline="fedavg")

# %% [markdown]
# The paper's derived rows — the change of each method from step to the Dirichlet splits, and of
# FedDF and FedUA over FedAvg, in percent of the reference — recomputed from our means and from
# the paper's printed accuracies. Most of the paper's printed percentages round from its printed
# accuracies; the check below lists those that do not (a slip or truncation, small either way).

# %% tags=["hide-input"]
t3_ours = report.mean_std_per_profile(chapter.table3_rows(ours), KEYS_T3, "global_acc")
t1_ours = report.mean_std_per_profile(chapter.table1_rows(ours), KEYS_T1, "global_acc")
derived = chapter.derived_rows(chapter.paper_table2(), chapter.paper_table3()).assign(source="paper")
for profile in t2_ours.profile.unique():
    derived = pd.concat([derived, chapter.derived_rows(t2_ours[t2_ours.profile == profile],
                                                       t3_ours[t3_ours.profile == profile]).assign(source=f"ours, {profile}")])
tables.show(derived.assign(algorithm=derived.algorithm.map(chapter.METHODS))
            .pivot_table(index=["row", "algorithm"], columns=["source", "column"], values="value", sort=False), digits=1)
printed = chapter.printed_check()
display(Markdown(f"The paper's printed percentages: {int(printed.agrees.sum())} of {len(printed)} round from its accuracies; "
                 "these do not:"))
tables.show(printed[~printed.agrees].assign(algorithm=lambda f: f.algorithm.map(chapter.METHODS)), digits={"computed": 2})

# %% [markdown]
# ## Table 3: accuracy under different participation ratios
#
# Step split; at C < 1 each round samples round(C · 10) clients, so FedAvg averages and FedDF and
# FedUA distil fewer teachers.

# %% tags=["hide-input"]
table3 = report.show_comparison(t3_ours, chapter.paper_table3(), KEYS_T3, "Table 3 — step", {"algorithm": chapter.METHODS},
                                baseline="fedavg", key_names={"participation": "C ="})

# %% [markdown]
# ## Table 1: which samples to distil
#
# FedDF (uniform teacher weights) distilling only a share SR of $U$, chosen at random or by the
# highest BALD score (step, C = 1). At SR = 1 both rules keep all of $U$: in our implementation
# the two cells are one run by construction, while the paper reports 72.1 (Random) and 73.2
# (BALD) there — more than two spreads apart, so its BALD rule may do something besides choosing
# a subset (the text also speaks of screening "sample batches"), or it is run-to-run variation.

# %% tags=["hide-input"]
table1 = report.show_comparison(t1_ours, chapter.paper_table1(), KEYS_T1, "Table 1 — FedDF with sample selection",
              {"selection": chapter.SELECTION_NAMES}, method="selection", key_names={"ratio": "SR ="})

# %% [markdown]
# ## Fig. 13: learning curves
#
# Global accuracy per evaluated round on the step split at C = 1, mean over seeds with a ± 1 std
# band. The paper finds both distillation methods clearly above FedAvg early on, growth levelling
# off after about 14 of 40 rounds, and FedUA ending 2–3 points above FedDF.

# %% tags=["hide-input"]
history = chapter.history_frame(records)
PROFILE_ORDER = ["paper", "reduced", params.profile]
curves = chapter.table2_rows(history) if len(history) else history
if len(curves):
    curves = curves[(curves.partition == partition_names[0])]
    shown = next(p for p in PROFILE_ORDER if p in set(curves.profile))
    curves = curves[curves.profile == shown]
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    plots.learning_curves(curves.assign(algorithm=curves.algorithm.map(chapter.METHODS)), ax, y="global_acc",
                          title=f"{partition_names[0]}, C = 1, profile {shown}", highlight="FedUA")
    plots.legend_below(fig, ax)
    seeds_text = plots.seeds_text(curves, ["algorithm"])
    plots.caption(fig, "The global model's accuracy on the test split (%) at each evaluated round, a line per "
                       f"method, from the {shown} profile's records ({partition_names[0]} split, C = 1): the line is "
                       f"the mean over the method's seeds ({seeds_text}), the band ± 1 std over them (none with one "
                       "seed).")

# %% [markdown]
# ## Can the weighting be trusted? Diagnostics
#
# **How one-hot are the weights?** The mean over samples of the largest teacher weight: 1/K for
# uniform weights, 1 when a single teacher decides every sample. **How much regularisation did
# the GDA need?** The jitter on the diagonal of the covariances the server evaluated, relative
# to the mean feature variance: what the client added in float64 plus what the server had to add
# after the float32 upload (a covariance that factors in float64 may not after rounding; that
# second jitter is part of what FedUA's weights see, so it is counted here, not hidden).

# %% tags=["hide-input"]
fedua_history = history[history.algorithm == "fedua"] if len(history) else history
if len(fedua_history):
    weights = fedua_history.groupby(["profile", "partition", "participation", "round"])["mean_max_weight"].mean().unstack("round")
    evaluated = list(weights.columns)
    picked = list(dict.fromkeys(evaluated[round(q * (len(evaluated) - 1))] for q in (0, 0.25, 0.5, 0.75, 1)))
    shown_weights = weights[picked].rename(columns=lambda r: f"round {r}").assign(**{"mean over rounds": weights.mean(axis=1)})
    display(Markdown(f"Mean largest teacher weight (mean over seeds) at the first, last and three evenly spaced of the "
                     f"{len(evaluated)} evaluated rounds, and its mean over all of them:"))
    tables.show(shown_weights, digits=3, settings=["participation"])
    jitters = chapter.jitter_counts(records)
    if len(jitters):
        display(Markdown(f"GDA jitter (× the mean feature variance; 0: every covariance factored as fitted) over the "
                         f"{jitters['client fits'].sum()} client fits of the evaluated rounds, by profile and partition:"))
        tables.show(jitters.assign(jitter=jitters.jitter.map(tables.scientific)))

# %% [markdown]
# **Figs. 10 and 11: what each teacher is unsure about.** For the last round of a FedUA run (step,
# C = 1, seed 0), the mean entropy of each teacher's softmax output (left) and of its GDA class
# posterior (right) over the server samples of each true class (labels read for this figure
# only). The paper's point: in feature space, a client's own major classes stand out as dark
# (certain) cells, while softmax entropy is low almost everywhere — an over-confident guide.

# %% tags=["hide-input"]
maps = [r for r in records if r.config["algorithm"] == "fedua" and chapter.cell_of(r)[:2] == ("step", 1.0)
        and r.config["seed"] == 0 and "density_entropy" in r.final]
if maps:
    record = sorted(maps, key=lambda r: PROFILE_ORDER.index(r.profile) if r.profile in PROFILE_ORDER else 3)[0]
    teachers = record.final["teachers"]
    fig, axes = plt.subplots(1, 2, figsize=(plots.MAX_WIDTH, 4.2))
    for ax, (key, title) in zip(axes, [("softmax_entropy", "softmax output (Fig. 10)"),
                                       ("density_entropy", "feature-density posterior (Fig. 11)")]):
        matrix = pd.DataFrame(record.final[key], index=teachers).astype(float)
        sns.heatmap(matrix, ax=ax, cmap="magma", vmin=0, vmax=np.log(10), cbar_kws={"label": "mean entropy (nats)"})
        ax.set(title=title, xlabel="true class", ylabel="client")
    fig.suptitle(f"profile {record.profile}, round {record.final['round']}")
    fig.tight_layout()
    plots.caption(fig, f"From the last round of one FedUA record ({record.profile} profile, step split, C = 1, "
                       "seed 0): a row per teacher (client), a column per true class of the server samples; "
                       "colour: the mean entropy, in nats, of the teacher's softmax output (left) and of its GDA "
                       "class posterior (right) over that class's samples, from 0 (dark: certain) to "
                       f"ln 10 = {np.log(10):.2f} (uniform over the classes).")
    entropy = {key: np.mean(record.final[key]) for key in ("softmax_entropy", "density_entropy")}
    feature_dim = chapter.feature_dimension(record.config["model"])
    display(Markdown(
        f"**Where our Fig. 11 contradicts the paper.** The paper's feature-density map is dark only on each client's "
        f"own classes; ours is dark almost everywhere: the mean posterior entropy is {entropy['density_entropy']:.3f} "
        f"nats against {entropy['softmax_entropy']:.3f} for the softmax (of at most {np.log(10):.2f}). As far as we can "
        "tell this is a property of the class models, not a plotting slip: the posterior is near one-hot (confident) "
        "even on classes the client never saw, which happens wherever one class Gaussian's log-density at a feature "
        f"exceeds the others' by several nats, as Gaussians in {feature_dim} dimensions (this run's features) readily do. The paper does not say how it "
        "regularised its covariances; with ten images per minor class in 64 dimensions, its minor-class covariances "
        "were rank-deficient and needed some regularisation."))
    jitter = record.final["gda_jitter"]
    display(Markdown(f"The GDA jitter in each of these clients' covariances as the server used them (client's plus the "
                     f"server's after the float32 upload; × the mean feature variance): {sum(j > 0 for j in jitter)} of "
                     f"{len(jitter)} clients needed one."))
    tables.show(pd.DataFrame([[tables.scientific(j) for j in jitter]], columns=[f"client {t}" for t in teachers]))

# %% [markdown]
# ## Bytes per round
#
# Measured from the messages: every client downloads the global model; FedUA's clients also
# upload their GDA (per class a d-dimensional mean and a d × d covariance in float32, plus counts; d = 84 for the
# 5-layer CNN, 64 for the ResNets).

# %% tags=["hide-input"]
if len(history):
    traffic = history.assign(up=history.bytes_up / history.clients / 1e6, down=history.bytes_down / history.clients / 1e6)
    traffic = traffic.groupby("algorithm")[["up", "down"]].mean()
    traffic.index = traffic.index.map(chapter.METHODS)
    fedavg_up = traffic.up.get("FedAvg", np.nan)
    traffic["upload vs FedAvg"] = (traffic.up / fedavg_up).map(lambda v: f"{v:.3f}x")
    tables.show(traffic.rename(columns={"up": "upload per client (MB)", "down": "download per client (MB)"}), digits=3)

# %% [markdown]
# ## The claims, cell by cell
#
# Each claim's effect in every cell of the records shown above, per profile (cells: partition, C
# and, for Table 1, the sample ratio), with each cell's own word from its 95% t-interval over seeds
# (paired by seed): ✓ holds, ✗ reversed, · inconclusive (one seed is always inconclusive), ○ left
# out of the verdict by the convergence gate (a method still rising, or too few evaluations), as the
# verdict box at the top counts them.

# %% tags=["hide-input"]
cells_shown = ledger.show_cell_verdicts(chapter, records)

# %% [markdown]
# ## Earlier design: robustness to what the paper leaves open
#
# *Folded: this grid ran on a design of the reduced profile the verdicts no longer use, and every
# claim reads "untested at this scale" under every variant; open the output below to read it.*
#
# The verdict above rests on one reading of each choice the paper does not fix: FedUA's paper states neither the server's optimiser settings, the distillation temperature, the sample ratio of Tables 2-3, nor how the densities become weights. The
# robustness grid (its variants are listed in `fedkd_core/chapters/fedua/robustness.py`) reruns the claims'
# cells (Tables 2 and 3, 3 seeds) once per alternative reading; the first variant keeps the chapter's
# method settings (server optimiser, temperature, sample ratio, weighting) on the grid's own cells and design.
# **The grid runs on the reduced profile's first design** (ResNet-8, 400 images per client, 10 rounds
# evaluated every 2, a constant local lr): it was not rerun when the profile was redesigned to train to
# a plateau (about 15 hours on 2 cores). Evaluated 5 times, every cell fails the convergence gate, so
# every claim reads *untested at this scale* under every variant: the table shows what the old design
# gave, not evidence for or against a claim
# (`notebooks/params/robustness/fedua.yaml` says so too). For each
# variant and claim: its verdict with the pooled effect in points and its 95% interval (`low`,
# `high`), the cells where it holds and where it is reversed, and the spread over seeds. Variants
# appear as their runs are committed
# (`python -m fedkd_core.sweep fedua --params notebooks/params/robustness/fedua.yaml --robustness
# --workers 2`); the [Claims page](claims.ipynb) gathers all four chapters.

# %% tags=["hide-input", "hide-output"]
from fedkd_core.chapters import robustness  # noqa: E402

robustness_table = robustness.show(chapter, "fedua")
