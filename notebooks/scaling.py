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
# # Scaling out: the same algorithms on Flower
#
# Every chapter runs its clients one after another in one process. That is the fastest way on a
# laptop, and the numbers are exact; but a study with hundreds of clients, several GPUs or real
# devices outgrows one process. Rather than a home-made distributed engine, `fedkd_core.flower`
# runs any algorithm of this book on [Flower](https://flower.ai) (its Message API): in Flower's
# simulation, whose clients are Ray worker processes, or on real machines with Flower's
# deployment engine. **The numbers do not change**: per-round client accuracies, global accuracy,
# bytes and selected clients are identical to the in-process run (`tests/test_flower.py` checks
# FedAvg, KnFu, FedCKD, FedPer and Selective-FD with 2 Ray workers, and FedAvg on two SuperNodes;
# `tests/test_conformance_flower.py` a method of a user's own on 1 worker).
#
# | | |
# |---|---|
# | **Engines** | in-process (`experiment.simulate`); Flower simulation on Ray (`python -m fedkd_core.flower RUN.yaml --workers N`); Flower deployment (`flower_app/run_local.sh RUN.yaml`) |
# | **Measured here** | wall time of a FedAvg round at 20 and 100 clients, in-process and on Flower with 1, 2 and 4 Ray workers; the overhead per message |
# | **Rerun** | `papermill notebooks/scaling.ipynb out.ipynb -f notebooks/params/quick/scaling.yaml -p clients "20,100"`; the full table: `python -m fedkd_core.chapters.scaling --params notebooks/params/paper/scaling.yaml` |
#
# ## How a round becomes messages
#
# The ServerApp runs the project's own round loop (`experiment.simulate` with a Flower client
# engine), so the client sampler, the algorithm's server steps and the byte counts are the same
# code as in-process. Only the client steps travel:
#
# | step of `experiment._run_round` | in-process | on Flower |
# |---|---|---|
# | select clients | seeded sampler | the same sampler, on the ServerApp (not Flower's) |
# | `download(k)` | a dict of tensors | the same dict in an `ArrayRecord`, message `train.update` to the node holding client $k$ |
# | `client_update(k, ·)` | on the algorithm | on a replica of the algorithm in the client process, from the client's state in Flower's `context.state` |
# | `server_update(uploads)` | on the algorithm | on the ServerApp (server-side distillation too) |
# | `reply(k)` / `client_finish(k, ·)` | two-phase methods (KnFu, FedMD) | message `train.finish` |
# | evaluation | every client's model | `query.state` brings each client's state back; scored by the same code |
#
# Two properties of the core make the engines agree. **Client state is separable**: each
# algorithm names what a client keeps between rounds (`Algorithm.CLIENT_STATE`: its personal
# model, its history model, ...), and `client_state` / `load_client_state` move it through a
# message. **Randomness belongs to a (seed, round, party, phase)**: every client step draws from
# its own generator (`fedkd_core.randomness`), so it does not matter which process runs which
# client, or in what order.
#
# Faults are loud: a client that raises, or does not answer within the timeout, stops the run
# with an error naming the client and the reason. There is no retry, because a retried client
# step would no longer be the in-process run.

# %% tags=["parameters", "remove-input"]
profile = "smoke"
clients = "4"
workers = "1"
rounds = 2
samples_per_client = 20
local_epochs = 1
batch_size = 10
dataset = "mnist"
model = "knfu_m1"
measure_overhead = False

# %% tags=["remove-input"]
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from fedkd_core import plots, report, tables
from fedkd_core.chapters import notebook_params, scaling
from fedkd_core.cpuinfo import machine_text

params = notebook_params(scaling.Params, globals())
plots.use_book_style()
tables.show(report.parameters_table(params))

# %% [markdown]
# ## Measured while this page was built
#
# FedAvg with KnFu's M1 on MNIST, one local epoch per round; every engine runs the same
# configuration. "First round" includes, on Flower, each Ray worker building its replica of the
# experiment (data split, initial model); "later rounds" is the steady state. The whole run adds
# Ray's and Flower's start-up.

# %% tags=["hide-input", "remove-stderr"]
measured = scaling.measure(params)
machine = measured["machine"]
display(Markdown(f"Measured on **{machine_text(machine['cpu'], machine['cores'])}**, {machine['measured']}; "
                 f"profile `{measured['profile']}`, {params.rounds} rounds, {params.samples_per_client} images per client."))
tables.show(scaling.table(measured), digits=2)


# %% [markdown]
# ## The full measurement
#
# 20 and 100 clients, in-process and on Flower with 1, 2 and 4 Ray workers, measured by
# `python -m fedkd_core.chapters.scaling --params notebooks/params/paper/scaling.yaml` on an
# otherwise idle machine; each committed file is shown with the machine it was measured on.

# %% tags=["remove-input"]
def plot_rounds(measurement: dict):
    frame = pd.DataFrame(measurement["rows"])
    fig, ax = plt.subplots(figsize=(7, 3.2))
    sns.barplot(frame, x="clients", y="later_round_s", hue="engine", ax=ax)
    ax.set_ylabel("seconds per round (steady state)")
    ax.set_title(machine_text(measurement['machine']['cpu'], measurement['machine']['cores']))
    plots.caption(fig, f"Seconds per round after the first (the mean of rounds 2 to {measurement['params']['rounds']}, "
                       "the steady state) per client count (x) and engine (bar colour), from this committed "
                       f"measurement (profile `{measurement['profile']}`); lower is faster.")


saved = scaling.saved_measurements()
if not saved:
    display(Markdown("No committed measurement yet (`results/scaling/` is empty)."))
for measurement in saved:
    machine = measurement["machine"]
    display(Markdown(f"### {machine_text(machine['cpu'], machine['cores'])} ({machine['measured']}, profile `{measurement['profile']}`)"))
    tables.show(scaling.table(measurement), digits=2)
    plot_rounds(measurement)
    display(Markdown(scaling.summary_text(measurement)))

# %% [markdown]
# ### What the numbers mean
#
# On one machine the in-process engine runs the clients one after another (one torch thread per
# process, as everywhere in this book); Flower runs them in parallel in its workers but adds the
# messages (arrays serialised and routed through an in-memory SuperLink), each worker's replica
# start-up and, for evaluation, the transfer of every client's state. The ratios above show how
# these balance on the machine that measured them; more workers than cores only add contention.
# What Flower buys is elsewhere: client processes on several GPUs or machines, and the very same
# apps on real devices. Ray also needs care on small machines: it runs its workers at nice 15,
# which starved them next to any busy process (importing torch in a client took 65 s instead of
# 3 s beside a running sweep), so
# `fedkd_core.flower` sets `RAY_worker_niceness=0` unless you set it yourself.

# %% [markdown]
# ## On real nodes
#
# `flower_app/` is a Flower App whose components are `fedkd_core.flower:serverapp` and
# `fedkd_core.flower_clientapp:clientapp`; every machine needs `fedkd_core` installed and the data in
# `FEDKD_DATA`, and the run's config travels in the messages. `flower_app/run_local.sh RUN.yaml`
# runs this sequence on 127.0.0.1 and is what `tests/test_flower.py` checks (identical numbers
# to the in-process run):
#
# ```bash
# flower-superlink --insecure --port 8000 --disable-runtime-dependency-installation
# flower-supernode --insecure --superlink 127.0.0.1:8000 --port 8001 --node-config "partition-id=0 num-partitions=2"
# flower-supernode --insecure --superlink 127.0.0.1:8000 --port 8002 --node-config "partition-id=1 num-partitions=2"
# # a connection "here" in ~/.flwr/config.toml: [superlink.here] address = "127.0.0.1:8000", insecure = true
# flwr run flower_app here --run-config "configs='/abs/path/RUN.yaml' profile='deployment'" --stream
# ```
#
# On real machines the SuperLink runs on one host, a SuperNode on each device (client $k$ is the
# SuperNode started with `partition-id=k`), with TLS instead of `--insecure`. On one machine
# the deployment engine is only a rehearsal: in the test above its rounds are far slower than the
# simulation's, so use the simulation there and the deployment engine for real devices.
