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
# # FedGMKD: GMM prototypes and discrepancy-aware aggregation
#
# FedGMKD (Zhang, Shan, Han) claims that sharing Gaussian-mixture prototypes per class (CKF) and
# weighting clients by how far their predictions stray (DAT) beats eight prototype and
# distillation baselines.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
methods = "fedavg,fedgmkd,fedgmkd_code"
clients = "3"
alpha = 0.5
ablation_alphas = ""
table5 = ""
seeds = 1
model = "cnn5_code32"
samples_per_client = 100
transfer_size = 100
rounds = 2
local_epochs = 1
batch_size = 32
lr = 0.001
drop_last = True
max_components = 2
min_components = 1
dat_a = 0.2
dat_reference = "preliminary"
kd_on = "probs"
max_grad_norm = 0.0
local_test_size = 20
global_test_size = 200
last_rounds = 5
mixed_precision = "auto"
reuse_reduced = True

# %% tags=["remove-input"]
import pandas as pd
from IPython.display import Markdown, display

from fedkd_core import plots, report, tables
from fedkd_core.algorithms import algorithm_config
from fedkd_core.chapters import fedgmkd as chapter
from fedkd_core.chapters import notebook_params, reuse_message, uncovered
from fedkd_core.cpuinfo import machine_text
from fedkd_core.federation import build_federated_data
from fedkd_core.results import run_grid

params = notebook_params(chapter.Params, globals())
plots.use_book_style()

# %% [markdown]
# ## Verdict

# %% tags=["remove-input"]
from fedkd_core.chapters import ledger  # noqa: E402

verdict_rows = ledger.verdict_box(chapter)
display(Markdown(chapter.verdict_basis_text()))

# %% tags=["remove-input"]
basis = chapter.verdict_basis()
moved = basis.params == chapter.REDESIGN_PROFILE
display(Markdown(chapter.resting_text(moved)))

# %% [markdown]
# ### Stopping at 15 rounds or at 50: what it costs
#
# The reduced profile stops at round 15; its rerun (`notebooks/params/reduced/redesign/fedgmkd.yaml`)
# runs the same grid to the paper's T = 50. Each rerun passes through round 15, so it shows what
# stopping there costs: per method and client count, global accuracy (%) read as the chapter reads it
# (mean of the last 5 evaluations) at round 15 and at the end, and the convergence gate's word at each
# (the method's mean late gain over seeds, in points over the last 20% of the rounds; 1 point or
# more is "rising").

# %% tags=["hide-input"]
redesign_runs = chapter.redesign_records()
redesign_planned = len(chapter.experiments(chapter.REDESIGN_PROFILE))
if redesign_runs:
    tables.show(chapter.round_budget_table(redesign_runs),
                legend="Global accuracy (%), Table 1's cells the rerun has reached, mean over the seeds committed.")
    local_budget = chapter.round_budget_table(redesign_runs, metric="alma")
    display(Markdown(f"{len(redesign_runs)} of {redesign_planned} runs committed. In local accuracy (ALMA, not "
                     "shown: the table above is global accuracy) the same rows move "
                     f"{tables.signed(local_budget['gain (points)'].mean())} points on average between "
                     f"round 15 and the end; the gate reads {(~local_budget['gate at round 15'].str.startswith('flat')).sum()} "
                     f"of {len(local_budget)} of them as not flat at round 15 and "
                     f"{(~local_budget['gate at the end'].str.startswith('flat')).sum()} at the end."))
else:
    display(Markdown(f"0 of {redesign_planned} runs committed yet: `python -m fedkd_core.sweep fedgmkd --params "
                     "notebooks/params/reduced/redesign/fedgmkd.yaml --workers 2`."))

# %% [markdown]
# **Counted at the paper's budget, or left out?** The verdicts on the rerun count a cell whose
# methods are still rising at round 50, since that is where the paper stops too. Whether that
# choice decides anything: each claim on the complete rerun with every cell counted beside the same
# claim with the still-rising cells left out (⚑ where the words differ).

# %% tags=["hide-input"]
if moved:
    tables.show(chapter.gate_sensitivity(redesign_runs),
                legend="Effects in accuracy points with 95% intervals; cells: those counted by each reading.")
else:
    display(Markdown(f"Shown once the rerun is complete ({len(redesign_runs)} of {redesign_planned} runs committed): "
                     "on a partial rerun, the verdicts would rest on whichever seeds the sweep reached first."))

# %% [markdown]
# ## The paper and this reproduction
#
# Prototype methods (FedProto, FedHKD, FPL) let clients share, per class, a summary of their
# feature space instead of (or beside) their models. Zhang, Shan and Han make the summary a
# Gaussian mixture's prototype and soft prediction per class (**cluster knowledge fusion**, CKF)
# and weigh each client's knowledge of a class by its share of the class, lowered by how far its
# soft prediction is from the consensus (**discrepancy-aware aggregation**, DAT). This chapter
# implements FedGMKD from the paper and from its released code, runs it against the eight
# baselines of the paper's Table 1 on CIFAR-10 split by Dir(β) (each client's class shares drawn
# from a Dirichlet distribution; the smaller β, the more skewed), and checks what the equations
# compute. *Local* accuracy is each client's model on its own test set, *global* the aggregated
# model on the whole test set.

# %% tags=["remove-input"]
from fedkd_core.chapters import card  # noqa: E402

card.show_citation("fedgmkd")

# %% [markdown]
# | | |
# |---|---|
# | **Reproduces** | Table 1's CIFAR-10 block (local and global accuracy, 10 / 20 / 50 clients, nine methods, time per client-round); Table 6 (mean prototypes + DAT); Table 3 (only CKF / only DAT) and Table 5 (λ, γ) where a profile runs them |
# | **Methods** | FedAvg, FedProx, MOON, FedGen, FedMD, FedProto, FPL, FjORD, FedGMKD (`fedkd_core/algorithms/`, one module each) |
# | **Data** | CIFAR-10, Dir(β = 0.5) label skew; the clients of each column hold 500 images each on average (the paper: 10 / 20 / 50 clients use 10 / 20 / 50 % of the training set) |
# | **The paper's numbers** | Table 1 (and the time per round) from the paper's main text (`shared/papers/fedgmkd.md` is a poster-length copy holding only Table 1); Tables 3, 5 and 6 from the full NeurIPS paper's appendix A.4.2, A.4.4 and A.4.5 as transcribed in `shared/specs/fedgmkd.md` §4 (the full text is not in this repository: those cells, and the verdicts' "paper's tables" column for "GMM prototypes beat mean prototypes", "DAT helps" and "CKF helps", rest on that transcription; `tests/test_paper_tables.py` checks the CSVs against it) |
# | **Metrics** | local accuracy: each client's model right after its local training, on a local test set with its class mix; global accuracy: the aggregated model on the CIFAR-10 test set; both the mean over the last 5 rounds |
# | **Profiles** | smoke (defaults below, seconds, CI); quick (`make book`); **reduced** (the paper's data and clients, cnn5 with the 32-d code, 15 rounds, 3 seeds; Table 1 with the code's FedGMKD and Table 6's HK + DAT, and Table 3 at 10 clients) and its **rerun at the paper's 50 rounds** (`reduced/redesign/fedgmkd.yaml`, the same grid): the records of whichever the verdicts rest on are committed and shown in every profile; paper (ResNet-18, 50 rounds: GPU work) |

# %% [markdown]
# ## Reproduce this chapter

# %% tags=["remove-input"]
reproduce_times = card.reproduce_box("fedgmkd")

# %% [markdown]
# The parameters this page was executed with:

# %% tags=["remove-input"]
tables.show(report.parameters_table(params))
LABELS = {key: method.label for key, method in chapter.METHODS.items()}

# %% [markdown]
# ## The method
#
# A model is a feature extractor $F$ with a 32-dimensional output $h = F(x)$ and a linear
# classifier $C$. (The paper names DAT the *discrepancy-aware technique*; we say aggregation, which is
# what it does.) A round $r$ of FedGMKD (paper §3, Algorithm 1), all clients participating:
#
# 1. **Local training.** Client $i$ starts from the global model $W^{r-1}$ and minimises (Eq. 13)
#
#    $$\begin{aligned}
#      \mathcal L_i ={}& \frac{1}{|D_i|}\sum_{(x,y)\in D_i} \mathrm{CE}\big(C(F(x)), y\big)
#      + \lambda \frac{1}{|D_i|}\sum_{(x,y)\in D_i} \big\lVert F(x) - H_y \big\rVert_2^2 \\
#      &+ \frac{\gamma}{J} \sum_{j=1}^{J} \big\lVert \mathrm{softmax}\big(C(H_j)/T\big) - Q_j \big\rVert_2^2,
#    \end{aligned}$$
#
#    with the global prototypes $H_j$ and soft predictions $Q_j$ of the previous round (round 1:
#    cross-entropy alone). The trained model is the client's local model.
# 2. **Cluster knowledge fusion (CKF).** For each class $j$ the client fits a Gaussian mixture
#    $\{\pi_m, \mu_m, \Sigma_m\}_{m=1}^{M}$ to its features $\{h_n\}$ of that class ($M$ by BIC) and
#    forms the prototype (Eqs. 4–5) and the soft prediction (Eq. 3, read as the class mean)
#
#    $$\begin{aligned}
#      \gamma_m(h) &= \frac{\pi_m \mathcal N(h;\mu_m,\Sigma_m)}{\sum_{m'} \pi_{m'} \mathcal N(h;\mu_{m'},\Sigma_{m'})}, \\
#      \hat h_i^j &= \frac{1}{N_i^j}\sum_{n} \sum_m \gamma_m(h_n)\,\mu_m, \\
#      \hat q_i^j &= \frac{1}{N_i^j}\sum_n \mathrm{softmax}\big(C(h_n)/T\big).
#    \end{aligned}$$
# 3. **Discrepancy-aware aggregation (DAT).** Per class $j$, over the clients that hold it
#    (Eqs. 9–11), with $a = b = 0.2$:
#
#    $$\begin{aligned}
#      w^{\text{init}}_{ij} &= \frac{N_i^j}{\sum_{i'} N_{i'}^j}, \qquad
#      d_{ij} = \mathrm{KL}\big(\hat q_i^j \,\Vert\, \hat Q_j\big), \\
#      w_{ij} &= \frac{\mathrm{ReLU}(w^{\text{init}}_{ij} - a\,d_{ij} + b)}{\sum_{i'} \mathrm{ReLU}(w^{\text{init}}_{i'j} - a\,d_{i'j} + b)},
#    \end{aligned}$$
#
#    where $\hat Q_j = \sum_i w^{\text{init}}_{ij}\hat q_i^j$ is the preliminary aggregate of
#    Appendix A.2 (Algorithm 1 reads $d$ against last round's $Q_j$; both are options). Then
#    $H_j = \sum_i w_{ij} \hat h_i^j$ and $Q_j = \sum_i w_{ij} \hat q_i^j$ (Eq. 12), and the server
#    averages the models (weights unstated; we use data sizes).
#
# **What the prototype really is.** Averaged over the class's samples, Eq. 5 is
# $\sum_m \big(\tfrac1N\sum_n\gamma_m(h_n)\big)\mu_m$. Every M-step of EM sets
# $\pi_m = \tfrac1N\sum_n\gamma_m(h_n)$ and $\mu_m = \sum_n\gamma_m(h_n)\,h_n / \sum_n\gamma_m(h_n)$, so
# $\sum_m \pi_m\mu_m = \bar h$, the class mean, exactly; at a fixed point of EM the responsibilities
# that Eq. 5 recomputes are the ones of the last M-step, so Eq. 5 is $\bar h$ as well — for *any*
# number of components. EM stops short of its fixed point (sklearn, which the runs use, stops once the
# mean log-likelihood gains less than a tolerance), so Eq. 5 is the class mean up to EM's stopping
# error. The released code computes $\sum_m \pi_m \mu_m$ on features standardised per class, where the
# mean is 0: its prototypes are the zero vector.
#
# First, real features. For each class of one client, $M$ chosen by BIC in the chapter's range
# (`min_components` to `max_components`, as the runs choose it), and $M$ fixed (the columns
# "M = …"; "—": fewer images than components):

# %% tags=["hide-input"]
IDENTITY_EPOCHS = 2
identity = chapter.prototype_identity(params, epochs=IDENTITY_EPOCHS)
display(Markdown(f"Client 0 of the {params.profile} profile ({params.client_counts()[0]} clients, seed 0) after "
                 f"{IDENTITY_EPOCHS} epochs of training on its own images; ‖·‖ in the 32-d feature space."))
gap_columns = [column for column in identity if column.startswith("‖Eq. 5") or column == "‖code prototype‖"]
responsibility = identity.filter(like="mean largest γ")
shown = identity.drop(columns=responsibility.columns)
tables.show(shown.assign(**{column: shown[column].map(tables.scientific) for column in gap_columns}), digits=3)
display(Markdown(
    f"BIC chose more than one component for **{int((identity['M by BIC'] > 1).sum())} of {len(identity)}** classes. "
    f"Largest ‖Eq. 5 − class mean‖ over the classes and fits: **{identity.filter(like='‖Eq. 5').max().max():.2g}** "
    f"(class means have norms {identity['‖class mean‖'].min():.2f}–{identity['‖class mean‖'].max():.2f}); largest "
    f"‖code prototype‖: **{identity['‖code prototype‖'].max():.2g}**. With $M$ fixed, the mean over a class's images "
    f"of their largest responsibility is at least {tables.cell_text(responsibility.min().min(), 3)} in every class "
    "(1: every feature lies wholly in one component, and Eq. 5 is then the component means weighted by their "
    "sizes, which is the mean by plain arithmetic)."))

# %% [markdown]
# A case where the components share points, so the identity is not mere arithmetic: points drawn
# from three overlapping 2-d Gaussians, $M$ chosen by BIC in the same
# range, then that mixture refitted with EM stopped at ever smaller tolerances (the first row:
# sklearn's default, the one the runs use):

# %% tags=["hide-input"]
mixture = chapter.mixture_identity(params.min_components, params.max_components)
tiny = ["‖Eq. 5 − mean‖", "‖Σ π_m μ_m − mean‖"]
tables.show(mixture.assign(**{column: mixture[column].map(tables.scientific) for column in tiny}), digits=3,
            settings=["EM tolerance"])
first, last = mixture.iloc[0], mixture.iloc[-1]
display(Markdown(
    f"{len(chapter.hand_made_mixture())} points, {int(first.components)} components, mean largest responsibility "
    f"{first['mean largest γ']:.3f}. Eq. 5 lies {first['‖Eq. 5 − mean‖']:.1e} from the mean (of norm "
    f"{first['‖mean‖']:.2f}) at the runs' tolerance, {last['‖Eq. 5 − mean‖']:.1e} at "
    f"{tables.setting_text(last['EM tolerance'])}; Σ π_m μ_m lies at most {mixture['‖Σ π_m μ_m − mean‖'].max():.1e} "
    "from it at every tolerance."))

# %% [markdown]
# So the paper's "GMM prototype" is FedHKD's mean prototype up to EM's stopping error: an error
# that matters only where a class's features fall into overlapping components, and that vanishes
# to rounding where BIC picks one component (then Eq. 5 is the mean after a single M-step).

# %% [markdown]
# ## The paper and its released code
#
# The authors' code (`SereinZY/FedGMKD`, a fork of FedHKD's) differs from the paper in most
# places that matter. We implement the paper as FedGMKD and the code's behaviour as the variant
# **FedGMKD (code)**, without its indexing bugs, and run both (notes: `shared/specs/fedgmkd.md` §2):

# %% tags=["hide-input", "nbval-check-output"]
paper_used, code_used = algorithm_config("fedgmkd", {"variant": "paper"}), algorithm_config("fedgmkd", {"variant": "code"})
differences = [
    ("prototype ĥ", "Eq. 5 on the features (GMM, 2–7 components)", "Σ π_m μ_m on per-class standardised features (≡ 0)",
     paper_used.prototype, code_used.prototype),
    ("soft prediction q̂", "Eq. 5 on soft predictions", "class mean of softmax(Z/T), T = 0.6", "class mean", "class mean"),
    ("DAT initial weight", "class share N_i^j / Σ N^j", "client's total sample count n_i", paper_used.dat_init, code_used.dat_init),
    ("DAT discrepancy d", "KL of soft predictions", "KL of softmax(prototype features) / 32, vs last round",
     paper_used.dat_reference, code_used.dat_reference),
    ("DAT a", "0.2", "0.4 (0.2 in its model weights)", paper_used.dat_a, code_used.dat_a),
    ("model weights", "unstated", "ReLU(n_i − 0.2·‖p_i − 1/C‖ + 0.2)", paper_used.model_weights, code_used.model_weights),
    ("loss form", "Eq. 13: squared L2, summed over dimensions", "MSE and KLDivLoss, means over all elements",
     paper_used.loss_form, code_used.loss_form),
    ("gradient clipping", "none", "norm 1.1 in rounds with knowledge", *(f"norm {v:g}" if v else "none" for v in (paper_used.max_grad_norm, code_used.max_grad_norm))),
    ("bugs not reproduced", "—", "per-class weight lists never reset; weights attached to the wrong clients", "—", "—"),
]
tables.show(pd.DataFrame(differences, columns=["item", "paper", "released code", "FedGMKD (ours)", "FedGMKD (code)"]))

# %% [markdown]
# ## Hyperparameters
#
# FedGMKD's §4.4 gives each baseline one or two settings; the rest come from the baselines'
# official code (the notes' §3 gives the source of each). Every method shares the model,
# optimiser and data of its profile. One column per profile: the profile this page was executed
# with, and the one whose committed records the tables below show and the verdicts rest on (one
# column where they coincide).

# %% tags=["hide-input"]
from fedkd_core.chapters.datafiles import profile_columns  # noqa: E402

shown_profiles = chapter.profiles_shown(params)
tables.show(chapter.settings_table(profile_columns([(params, "this page"),
                                                   (basis.params, "the records shown, the verdicts")])))

# %% [markdown]
# ## The split
#
# Class counts per client of the first column of each profile above (seed 0): Dir(β) label skew
# over a pool of clients × `samples_per_client` images, every client's local test set drawn from
# the CIFAR-10 test split with its own class mix. Bubble areas are relative to the largest count of
# their panel.

# %% tags=["hide-input"]
fig, axes = plots.grid(len(shown_profiles), height=3.6, per_row=2)
for ax, (heading, shown_params) in zip(axes, shown_profiles.items()):
    split = build_federated_data(chapter.data_config(shown_params, shown_params.client_counts()[0]), seed=0)
    plots.label_bubbles(split.train_histograms(), ax,
                        title=f"{heading}:\nDir({shown_params.alpha}), {split.num_clients} clients,\n"
                              f"{shown_params.samples_per_client} images each on average")
fig.tight_layout()
plots.caption(fig, "A panel per profile of the table above, computed here from the split at its first client "
                   "count (seed 0), not read from records: client on x, class on y, a bubble's area proportional "
                   "to that client's CIFAR-10 training images of that class (relative to the panel's largest "
                   "count).")

# %% [markdown]
# ## Runs
#
# This profile's grid runs here (a configuration that has run before is read from its stored
# record, not run again). Cells that the committed records the **verdicts rest on** cover
# (the reduced profile's rerun at 50 rounds; the line under the verdict box names it) are shown from those
# records, in every profile, as long as this profile runs the reduced profile's method (model,
# optimiser, GMM size, the FedGMKD options `min_components`, `dat_a`, `dat_reference`, `kd_on`,
# `max_grad_norm`; only the scale differs) and `reuse_reduced` is on. So the tables below show the
# runs the verdict box judges.

# %% tags=["hide-input"]
basis_records = basis.records
runs = run_grid(chapter.experiments_to_run(params, basis_records), profile=params.profile, progress=False)
# A cell the verdicts' records cover is shown from them only (run with the 15-round reduced profile,
# this page would otherwise hold both round budgets of each cell under the one profile name).
runs = uncovered(runs, basis_records, chapter.cell_of)
records = list({r.key: r for r in basis_records + runs}.values())
if message := reuse_message(params, chapter.method_differences(params)):
    print(message)
ours = chapter.summary(records, last=params.last_rounds)
print(f"{len(runs)} runs of this profile ({params.profile}) shown, {len(basis_records)} records the verdicts rest on "
      f"({basis.params.profile} profile, {basis.params.rounds} rounds); "
      f"{sum(r.timings['total_seconds'] for r in records):.0f} s of compute in their records")

# %% [markdown]
# ## Table 1: CIFAR-10, local and global accuracy
#
# Each cell of the paper's CIFAR-10 block beside ours (%, mean ± std over seeds of the mean of the
# last rounds), one table per profile that ran it. Below the paper's scale absolute accuracies
# cannot be compared, so each cell gives our rank among the methods of its column beside the
# paper's rank, and our gain over FedAvg beside the paper's; the legend under the table says what
# the colours mark.

# %% tags=["hide-input"]
KEYS = ["method", "clients", "metric"]


def show(ours_table: pd.DataFrame, paper: pd.DataFrame, keys: list[str], title: str, rows=("method",)) -> pd.DataFrame:
    """The paper's layout: ``rows`` as rows (the methods), the metric and clients (or α) as columns."""
    method = "method" if "method" in keys else ""
    return report.show_comparison(ours_table, paper, keys, title, {"method": LABELS}, digits=2, method=method,
                                  rows=list(rows), columns=[k for k in keys if k not in rows], baseline="fedavg",
                                  key_names={"metric": "", "lam": "λ", "gamma": "γ", "alpha": "β ="})


reduced = basis.params
kept, changed = ((" and its 50 rounds", "") if reduced.rounds == chapter.PAPER_ROUNDS
                 else ("", f" for {reduced.rounds} rounds instead of 50"))
display(Markdown(
    f"**What the records shown change:** they keep the paper's data, clients, optimiser, local epochs{kept}, "
    f"but train {reduced.model} ({chapter.parameter_count(reduced.model):,} parameters) instead of ResNet-18 with "
    f"the 32-d code ({chapter.parameter_count('resnet18_code32'):,}){changed}, so their accuracies are lower, "
    "and what can be compared is the ordering of the methods within a column."))
table1_ours = chapter.accuracy_per_profile(chapter.table1_rows(ours, params.alpha), KEYS)
paper1 = chapter.paper_table1()
table1 = show(table1_ours, paper1, KEYS, f"Table 1 — CIFAR-10, Dir({params.alpha})")
display(Markdown(report.markdown_list(chapter.ranking_summary(table1, LABELS))))

# %% [markdown]
# Tied methods each count as highest. Whether a difference between two methods exceeds the
# spread over seeds is judged cell by cell in [the claims, cell by cell](#the-claims-cell-by-cell)
# below, and in the verdict at the top.

# %% [markdown]
# The other two datasets of Table 1 cannot be run here — SVHN and CIFAR-100 are not among the
# offline datasets — and are shown as the paper reports them:

# %% tags=["hide-input"]
for dataset, reason in chapter.DATASET_REASON.items():
    paper_only = chapter.paper_table1(dataset).assign(method=lambda f: f.method.map(LABELS))
    display(Markdown(f"**{dataset}** (paper only: {reason})"))
    tables.show(paper_only.pivot_table(index="method", columns=["metric", "clients"], values="mean", sort=False), digits=2)

# %% [markdown]
# ## Cost: time per client-round
#
# Absolute seconds depend on the hardware (the paper: two A100s), so the comparison is the ratio
# to FedAvg on the same machine. Ours: wall-clock seconds of a round (all clients' training and
# knowledge extraction and the server's work, evaluation excluded) divided by the number of
# clients: the median over rounds, and the fastest of the seeds, for the runs of Table 1 (runs of
# a sweep may share the machine with other work, which only ever slows them). Our clients run one
# after another on one thread, so a round's time is the sum of its clients' times.

# %% tags=["hide-input"]
ratios = chapter.time_ratios(chapter.table1_rows(ours, params.alpha)) if len(ours) else None
machines = sorted({f"{machine_text(r.environment.get('device_name'))} ({r.profile} profile)" for r in records})
display(Markdown("Measured on: " + (", ".join(machines) if machines else "nothing yet") + ". Each cell: the time per "
                 "client-round as a multiple of FedAvg's on the same machine, the seconds in brackets; one table "
                 "per profile and machine."))
for title, cost in chapter.cost_tables(ratios):
    display(Markdown(f"**{title}**"))
    tables.show(cost.assign(method=cost.method.map(lambda key: LABELS.get(key, key))))
faster = ratios[(ratios.ratio < 1) & (ratios.method != "fedavg")] if ratios is not None else []
if len(faster):
    lowest = faster.groupby("method").ratio.min().sort_values()
    display(Markdown(
        "**Ratios below 1 are noise, not savings.** Every method here does at least FedAvg's local training, yet "
        + ", ".join(f"{LABELS.get(m, m)} {r:.2f}" for m, r in lowest.items())
        + " (lowest per method): FedAvg's own runs were slowed more by what shared the machine. Read a ratio "
        f"within about {1 - lowest.min():.0%} of another as no measured difference."))

# %% [markdown]
# ## Table 6: mean prototypes with DAT vs FedGMKD
#
# The paper's Table 6 credits the GMM prototypes with 0.8–2.5 points over FedHKD's mean
# "hyper-knowledge" aggregated with DAT. By the identity above, the paper's own Eq. 5 gives the
# class mean up to EM's stopping error, so in our implementation the two rows differ only by that
# error in their prototypes (HK + DAT runs the same DAT and the same loss): Eq. 5 itself gives no
# reason for a difference of points. The released code's prototypes (zero) could make one, since
# they turn the feature term into a pull of every feature towards the origin. Here: FedGMKD
# (Eq. 5), HK + DAT (class means, the same DAT) and FedGMKD (code).

# %% tags=["hide-input"]
table6_ours = table1_ours[table1_ours.method.isin(["fedgmkd", "hk_dat", "fedgmkd_code"])] if len(table1_ours) else table1_ours
table6 = show(table6_ours, chapter.paper_table6(), KEYS, "Table 6 — CIFAR-10")
if len(table6_ours):
    extra = table6_ours[table6_ours.method == "fedgmkd_code"]
    if len(extra):
        display(Markdown("FedGMKD (code), not in the paper's table:"))
        tables.show(extra.assign(method=extra.method.map(LABELS)), digits=2)

# %% [markdown]
# ## Table 3: only CKF, only DAT
#
# The paper does not define its ablation rows. Our reading: **only CKF** trains with Eq. 13 but
# aggregates the knowledge by class shares alone ($a = b = 0$); **only DAT** trains with
# cross-entropy alone (λ = γ = 0), so DAT can only act through the model weights, for which we use
# the released code's rule. The paper's Table 3 has β = 0.2 and 5 (clients unstated, 10 assumed,
# and a 75/25 per-client train/test split that our local test sets do not copy).

# %% tags=["hide-input"]
KEYS3 = ["method", "alpha", "metric"]
table3_ours = chapter.accuracy_per_profile(chapter.table3_rows(ours, params.client_counts()[0]), KEYS3)
table3 = show(table3_ours, chapter.paper_table3(), KEYS3,
              f"Table 3 — CIFAR-10, {params.client_counts()[0]} clients (paper: unstated, 10 assumed)")
if len(table3_ours):
    beside = table3_ours[~table3_ours.alpha.isin([0.2, 5.0])]
    if len(beside):
        display(Markdown(f"The same rows at β = {params.alpha} (not in the paper's Table 3):"))
        tables.show(beside.assign(method=beside.method.map(LABELS)), digits=2)

# %% [markdown]
# ## Table 5: λ and γ
#
# The paper's Table 5: FedGMKD at 10 clients with one weight at 0.06 and the other varied (λ: the
# feature term, γ: the prediction term, as the paper's text names them). Only the settings that
# the records shown here cover are set beside the paper's; FedGMKD's default (λ, γ) alone, Table
# 1's own setting, is not, since a single row has nothing to be ranked against.

# %% tags=["hide-input"]
KEYS5 = ["lam", "gamma", "metric"]
table5_ours = chapter.accuracy_per_profile(chapter.table5_rows(ours, params.client_counts()[0], params.alpha), KEYS5)
paper5 = chapter.paper_table5()
shown5, default5, not_run5 = chapter.table5_cells(table5_ours, paper5)
if len(shown5):
    table5_shown = show(table5_ours, shown5, KEYS5, rows=("lam", "gamma"),
                        title=f"Table 5 — CIFAR-10, {params.client_counts()[0]} clients (paper: 10), the settings run")
listed = " and ".join(f"{len(chapter.parse_pairs(p.table5))} in the {p.profile} profile" for p in shown_profiles.values())
display(Markdown(
    f"Of the paper's {len(paper5[['lam', 'gamma']].drop_duplicates())} (λ, γ) settings, set beside ours: "
    f"{chapter.weight_pairs_text(shown5) or 'none'}; run only as Table 1's setting: "
    f"{chapter.weight_pairs_text(default5) or 'none'}; not run: {chapter.weight_pairs_text(not_run5) or 'none'}. "
    f"A profile runs the (λ, γ) pairs of its `table5` list, which holds {listed}."))

# %% [markdown]
# ## Learning curves
#
# Global and local accuracy per round at the first client count, mean over seeds, from the first
# of the paper profile, the reduced profile and this page's profile that has runs.

# %% tags=["hide-input"]
PROFILE_ORDER = ["paper", "reduced", params.profile]
history = chapter.history_frame(records)
if len(history):
    curves = chapter.table1_rows(history, params.alpha)
    curves = curves[curves.clients == params.client_counts()[0]]
    shown = next(p for p in PROFILE_ORDER if p in set(curves.profile))
    curves = curves[curves.profile == shown]
    fig, axes = plots.grid(2, height=3.6)
    for ax, metric, title in zip(axes, ["global_acc", "alma"], ["global accuracy", "local accuracy"]):
        plots.learning_curves(curves.assign(algorithm=curves.method.map(LABELS)), ax, y=metric,
                              title=f"{title}, {params.client_counts()[0]} clients,\nprofile {shown}",
                              highlight=LABELS["fedgmkd"])
        ax.set_ylabel(f"{title} (%)")
    plots.legend_below(fig, axes[0])
    seeds_text = plots.seeds_text(curves, ["method"])
    plots.caption(fig, f"At each evaluated round of the {shown} profile's records (Dir(β = {params.alpha}), "
                       f"{params.client_counts()[0]} clients, FedGMKD at its default λ, γ): left, the global "
                       "model's accuracy on the test split; right, local accuracy (each client's model on its own "
                       f"test set, mean over clients). The line is the mean over the method's seeds ({seeds_text}), "
                       "the band ± 1 std over them (none with one seed).")

# %% [markdown]
# **Does DAT move the weights?** The mean over classes of the total variation between DAT's
# weights and the class shares $w^{\text{init}}$ (0: DAT changed nothing; with $b = 0.2$ added to
# every holder, DAT also pulls weights towards uniform), mean over seeds at a few rounds, the last,
# and over every round:

# %% tags=["hide-input"]
shift = chapter.dat_shift_table(history) if len(history) else history
if len(shift):
    tables.show(shift.assign(method=shift.method.map(LABELS)), digits=3)

# %% [markdown]
# ## Bytes per round
#
# Measured from the messages, per client and round: every method downloads and uploads the
# model; prototype methods add their class knowledge, FedGen its generator, FedMD its logits on
# the transfer set.

# %% tags=["hide-input"]
if len(ours):
    traffic = chapter.traffic_table(ours)
    tables.show(traffic.assign(method=traffic.method.map(LABELS)), digits=1)

# %% [markdown]
# ## The claims, cell by cell
#
# Each claim's effect in every cell of the records the verdict box judges (cells: the table, the
# clients, Dir(β) and the metric), then of this page's own runs where its profile is another, with
# each cell's own word from its 95% t-interval over seeds (paired by seed): ✓ holds, ✗ reversed,
# · inconclusive (one seed is always inconclusive), ○ left out of the verdict by the convergence
# gate (a method still rising at the last round of a reduced run; at the paper's round 50 a
# still-rising cell counts), as the verdict box at the top counts them.

# %% tags=["hide-input"]
basis = chapter.verdict_basis()
cells_shown = ledger.show_cell_verdicts(chapter, basis.records, basis.enforce_gate,
                                        label=f"{basis.params.profile}, {basis.params.rounds} rounds")
if runs and params != basis.params:  # both FedGMKD reduced profiles are named "reduced"
    ledger.show_cell_verdicts(chapter, runs, label=f"this page's {params.profile} runs")

# %% [markdown]
# **Cost.** FedGMKD's time per client-round against FedAvg's, per machine (the paper's ratio beside):

# %% tags=["hide-input"]
if ratios is not None:
    display(Markdown(report.markdown_list([
        f"FedGMKD takes {row.ratio:.2f}× FedAvg's time per client-round at {row.clients} clients "
        f"(profile {row.profile}, on {machine_text(row.machine)}; paper: {row.paper_ratio:.2f}×)."
        for row in chapter.fedgmkd_cost(ratios).itertuples()])))


# %% [markdown]
# ## Robustness to what the paper leaves open
#
# The verdict above rests on one reading of each choice the paper does not fix: FedGMKD's paper and released code disagree on DAT's reference, its a, the form of the prediction alignment, gradient clipping and the GMM's component range. The
# robustness grid (its variants are listed in `fedkd_core/chapters/fedgmkd/robustness.py`) reruns the claims'
# cells (the reduced profile's Table 1 block, 3 seeds, at 50 rounds, as the verdicts; only FedGMKD reruns, since the baselines do not change) once per alternative reading; the first variant is this chapter's own. For each
# variant and claim: its verdict with the pooled effect in points and its 95% interval (`low`,
# `high`), the cells where it holds and where it is reversed, and the spread over seeds. Variants
# appear as their runs are committed
# (`python -m fedkd_core.sweep fedgmkd --params notebooks/params/robustness/fedgmkd.yaml --robustness
# --workers 2`); the [Claims page](claims.ipynb) gathers all four chapters. Once the verdicts rest on
# the 50-round rerun, the same grid at 50 rounds takes the 15-round grid's place here and on the
# Claims page, but only when all its runs are finished (no variant shows before), judged as the
# verdicts are, still-rising cells counted: `python -m fedkd_core.sweep fedgmkd --params
# notebooks/params/robustness/redesign/fedgmkd.yaml --robustness --workers 2` (its chapter's-reading
# runs are the rerun's, so only FedGMKD reruns per variant).

# %% tags=["hide-input"]
from fedkd_core.chapters import robustness  # noqa: E402

robustness_table = robustness.show(chapter, "fedgmkd")
if ledger.grid_apart(chapter):  # the verdicts have moved onto a rerun at a larger scale, the grid not yet
    display(Markdown("**The grid and the verdict read different runs**: the grid's verdicts above are on runs at the "
                     "reduced profile's scale, the verdict box's on the rerun, until the grid is rerun at the "
                     "verdict's scale."))
