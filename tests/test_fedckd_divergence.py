"""The per-step trace of a diverged run (benchmarks/trace_divergence.py) and the chapter's figure and
words from it (fedkd_core.chapters.fedckd.divergence)."""

import gzip
import importlib.util
import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from fedkd_core.chapters.fedckd import divergence  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "results" / "paper" / "lg_fedavg" / "30bcd09506301b61.diverged.json"


def trace_module():
    spec = importlib.util.spec_from_file_location("trace_divergence", ROOT / "benchmarks" / "trace_divergence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_trace(tmp_path: Path, module) -> Path:
    """Two rounds of two clients, 10 local steps each (5 per epoch); client 14's update in round 2
    sees its largest |logit| leave the earlier range at step 4, its gradient at step 5, and its loss
    turn NaN at step 7."""
    rows = []
    for round_index, clients in ((1, (7, 14)), (2, (14, 16))):
        for client in clients:
            for step in range(10):
                blowup = round_index == 2 and client == 14
                row = {c: 1.0 for c in module.COLUMNS}
                row.update({"round": round_index, "client": client, "step": step, "epoch": step // 5, "classes": 2,
                            "loss": 0.5, "grad_norm": 2.0, "max_logit": 10.0, "update_norm": 0.02, "weight_norm": 10.0,
                            "finite": 1})
                if blowup and step >= 4:
                    row["max_logit"] = 10.0 * 4 ** (step - 3)
                if blowup and step >= 5:
                    row["grad_norm"] = 2.0 * 10 ** (step - 4)
                if blowup and step >= 7:
                    row.update({"loss": math.nan, "finite": 0})
                rows.append(row)
    prefix = tmp_path / "trace"
    with gzip.open(f"{prefix}-steps.csv.gz", "wt") as handle:
        handle.write(",".join(module.COLUMNS) + "\n")
        for row in rows:
            handle.write(",".join(str(row[c]) for c in module.COLUMNS) + "\n")
    comparison = [{"round": 1, "stored": True, "identical": True}, {"round": 2, "stored": True, "identical": True}]
    (tmp_path / "trace-rounds.json").write_text(json.dumps({
        "divergence": str(STORED), "key": "30bcd09506301b61", "stored_round": 53,
        "rerun": {"device_name": "AMD EPYC (family 26 model 2, AVX512-BF16)", "threads": 1, "seconds": 10.0,
                  "environment_variables": {"OMP_NUM_THREADS": "1", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}},
        "comparison": comparison}))
    return prefix


def test_the_figure_data_finds_the_first_non_finite_step_and_what_left_its_range_first(tmp_path):
    module = trace_module()
    data = module.figure_data(fake_trace(tmp_path, module))
    finding = data["finding"]
    assert (finding["round"], finding["client"], finding["step"], finding["epoch"]) == (2, 14, 7, 1)
    assert finding["steps_per_epoch"] == 5 and finding["client_earlier_rounds"] == [1]
    assert list(finding["first_past_baseline"].items())[:3] == [("max_logit", 4), ("grad_norm", 5), ("loss", 7)]
    assert sum(finding["client_classes"].values()) == 600 and len(finding["client_classes"]) == 2
    assert data["determinism"] == {"rounds_compared": 2, "rounds_identical": 2, "first_round_differing": None,
                                   "stored_device": "AMD EPYC (family 26 model 2, AVX512-BF16)"}
    text = divergence.trace_text(data)
    assert "every client's accuracy in all 2 rounds the stored run recorded is the stored one exactly" in text
    assert "MKL_ENABLE_INSTRUCTIONS=AVX2" in text and "OMP_NUM_THREADS" not in text
    assert "client 14's update" in text and "local step 7 (epoch 2, batch 3 of 5)" in text
    assert "the largest |logit| at step 4 (40 where no earlier step of any client passed 10)" in text
    figure = divergence.plot_trace(data)
    assert len(figure.axes) == len(divergence.PANELS)
    (tmp_path / "figure.json").write_text(json.dumps(data))
    assert divergence.traces(tmp_path) == []  # only trace_divergence-*.json files are read
    (tmp_path / "trace_divergence-x.json").write_text(json.dumps(data))
    assert divergence.traces(tmp_path)[0]["finding"] == json.loads(json.dumps(finding))


def test_a_rerun_that_did_not_diverge_says_so_and_where_it_left_the_stored_run(tmp_path):
    module = trace_module()
    prefix = fake_trace(tmp_path, module)
    steps = gzip.open(f"{prefix}-steps.csv.gz", "rt").read().replace("nan", "0.5").replace(",0\n", ",1\n")
    with gzip.open(f"{prefix}-steps.csv.gz", "wt") as handle:
        handle.write(steps)
    summary = json.loads((tmp_path / "trace-rounds.json").read_text())
    summary["comparison"][1]["identical"] = False
    (tmp_path / "trace-rounds.json").write_text(json.dumps(summary))
    data = module.figure_data(prefix)
    assert data["finding"]["diverged"] is False and data["finding"]["rounds_traced"] == 2
    spike = data["finding"]["spike"]  # the step of the largest loss, with the client's history
    assert spike["loss"] == 0.5 and spike["client_earlier_rounds"] in ([], [1])
    assert f"Its worst step: client {spike['client']} in round {spike['round']}" in divergence.trace_text(data)
    assert "1 of the 2 recorded rounds agree exactly" in divergence.trace_text(data)
    assert "the first to differ is round 2" in divergence.trace_text(data)
    figure = divergence.plot_trace(data)  # every round's largest values, the stored divergence marked
    assert len(figure.axes) == len(divergence.PANELS) and "no divergence in 2 rounds" in figure._suptitle.get_text()


@pytest.mark.parametrize("trace", divergence.traces(), ids=lambda t: t["key"])
def test_a_committed_trace_is_shown(trace):
    assert divergence.trace_text(trace)
    assert divergence.plot_trace(trace) is not None


def test_a_rerun_comparison_says_where_the_rerun_left_the_stored_run_and_how_far_it_got():
    check = {"algorithm": "lg_fedavg", "partition": "pathological", "seed": 0, "stored_round": 53,
             "stored_environment": {"device_name": "AMD EPYC (family 26 model 2, AVX512-BF16)"},
             "rerun": {"device_name": "AMD EPYC (family 25 model 17, AVX512-BF16)",
                       "environment_variables": {"OMP_NUM_THREADS": "1", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}},
             "comparison": [{"round": 1, "stored": True, "identical": True},
                            {"round": 2, "stored": True, "identical": False, "clients_differing": 2},
                            {"round": 5, "stored": True, "identical": False, "clients_differing": 47}],
             "passed_round_without_diverging": 63}
    text = divergence.determinism_check_text(check)
    assert text.startswith("LG-FedAvg, pathological, seed 0 diverged in round 53 on AMD EPYC Zen 5. Rerun on AMD EPYC Zen 4")
    assert ("round 1 agrees with the stored run exactly (all 100 client accuracies), round 2 differs in 2 of them "
            "and round 5 in 47; the rerun passed round 63 without diverging") in text
    assert "edge of stability" in text and "MKL_ENABLE_INSTRUCTIONS=AVX2" in text
    short = {**check, "passed_round_without_diverging": 20}  # not past the stored round: no conclusion drawn
    assert "edge of stability" not in divergence.determinism_check_text(short)


@pytest.mark.parametrize("check", divergence.determinism_checks(), ids=lambda c: f"{c['algorithm']}-{c['seed']}")
def test_a_committed_rerun_comparison_is_said_in_words(check):
    assert "diverged in round" in divergence.determinism_check_text(check)


@pytest.mark.slow  # a real round of 10 clients on Fashion-MNIST each
@pytest.mark.parametrize("stored", ["results/paper/pfedsd/e4d93f14b78c1811.diverged.json",
                                    "results/paper/lg_fedavg/30bcd09506301b61.diverged.json"])
def test_the_tracer_reads_every_local_step_of_the_methods_own_loss(tmp_path, stored):
    """One smoke round of the stored run (10 clients, all selected): a row per optimizer step of
    every client (epochs x batches), a finite loss and largest |logit| in each, for pFedSD's CE + KD
    loss as for LG-FedAvg's cross-entropy, and the masks the stored run drew (pFedSD's ran on a GPU
    before mask_generator: the device's generator; LG-FedAvg's on a CPU: the host's). The script runs
    in this process (its main undoes its hooks and patches on return, checked below), as
    `OMP_NUM_THREADS=1 python benchmarks/trace_divergence.py STORED --smoke --out OUT` runs it."""
    import pandas as pd
    import torch
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    from fedkd_core import experiment, models

    module = trace_module()
    before = (experiment.InProcessClients.__dict__["step"], experiment.evaluate, models.host_drawn,
              len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks), torch.get_num_threads())
    out = tmp_path / "trace"
    module.main([str(ROOT / stored), "--smoke", "--out", str(out)])
    assert (experiment.InProcessClients.__dict__["step"], experiment.evaluate, models.host_drawn,
            len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks), torch.get_num_threads()) == before
    assert all(m.train is __import__("fedkd_core.training", fromlist=["train"]).train for m in module.traced_modules())
    steps = pd.read_csv(f"{out}-steps.csv.gz")
    summary = json.loads(Path(f"{out}-rounds.json").read_text())
    config = json.loads((ROOT / stored).read_text())["config"]
    expected_masks = "device" if "pfedsd" in stored else "host"
    assert summary["rerun"]["masks"] == expected_masks
    assert sorted(steps.client.unique()) == list(range(10))
    epochs, batch = config["train"]["epochs"], config["train"]["batch_size"]
    sizes = steps.groupby("client").step.count()
    assert (sizes % epochs == 0).all() and (sizes >= epochs).all()
    assert (steps.groupby("client").epoch.max() == epochs - 1).all()
    assert steps.loss.notna().all() and (steps.loss > 0).all() and steps.max_logit.notna().all()
    assert (steps.grad_norm > 0).all() and (steps.update_norm > 0).all() and (steps.finite == 1).all()
    assert (steps.weight_head > 0).all() and batch > 0
