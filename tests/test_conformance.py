"""Every registered algorithm keeps the contract (fedkd_core.conformance), and each check fails for
the broken method it is there to catch. Replaces the hand-written list of the separability test
(which missed feddf and fedua): a method registered later is checked without editing this file.
The Flower runs are in test_conformance_flower.py (their own file, so that a worker takes them
beside this one's)."""

import os
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from fedkd_core import algorithms
from fedkd_core.algorithms import ALGORITHMS, REGISTERED_ENV, register
from fedkd_core.algorithms.shapes.base import parameters_message
from fedkd_core.algorithms.fedavg import FedAvg
from fedkd_core.conformance import (CHECKS, FAILED, PASSED, SKIPPED, ConformanceError, check, majority_scores,
                                    tiny_config)
from fedkd_core.federation import build_federated_data
from fedkd_core.training import train
from plugin_methods import FedAvgM, registry  # noqa: F401 (a fixture)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_registered_algorithm_keeps_the_contract(name):
    findings = check(name, flower=False, raise_on_failure=False)
    assert [f.check for f in findings] == [*CHECKS, "flower"]
    failed = [f"{f.check}: {f.detail}" for f in findings if f.status != PASSED and f.check != "flower"]
    assert not failed, failed


# --- each check catches what it is for ------------------------------------------------------------

class ReadsTheServer(FedAvg):
    """A client step that starts from the server's model instead of the message it downloaded."""

    def client_update(self, client, message):
        return super().client_update(client, parameters_message(self.model))


class DrawsFromNumpy(FedAvg):
    """A server step that draws from numpy's global generator instead of self.rng(SERVER)."""

    def server_update(self, uploads):
        super().server_update(uploads)
        with torch.no_grad():
            for p in self.model.parameters():
                p.add_(float(np.random.normal(scale=1e-3)))


class UploadsAList(FedAvg):
    """An upload whose payload is not a tensor: its bytes would go uncounted."""

    def client_update(self, client, message):
        upload = super().client_update(client, message)
        upload["extra"] = [0.0] * 100
        return upload


class UploadsViews(FedAvg):
    """Uploads that are views of the one worker model: in-process, each is overwritten by the next client."""

    def client_update(self, client, message):
        self.worker.load_state_dict(message)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client))
        return dict(self.worker.state_dict())


@pytest.mark.parametrize("broken, failing", [(ReadsTheServer, "separability"), (DrawsFromNumpy, "determinism"),
                                             (UploadsAList, "messages"), (UploadsViews, "messages")])
def test_each_check_fails_for_the_broken_method_it_is_for(registry, broken, failing, monkeypatch):
    findings = {f.check: f for f in check(broken, flower=False, raise_on_failure=False)}
    assert findings[failing].status == FAILED, findings[failing]
    assert findings["contract"].status == PASSED
    # Raising: the failing check alone again (every check ran above; running them all twice
    # doubled this test's time and tested nothing more).
    from fedkd_core import conformance

    monkeypatch.setattr(conformance, "CHECKS", {failing: CHECKS[failing]})
    with pytest.raises(ConformanceError, match=failing):
        check(broken, flower=False)


def test_a_method_defined_in_a_notebook_skips_only_the_flower_check(registry):
    local = type("InANotebook", (FedAvgM,), {"__module__": "__main__"})
    findings = {f.check: f for f in check(local, flower=True, raise_on_failure=False)}
    assert findings["flower"].status == SKIPPED and "put it in a module" in findings["flower"].detail
    assert all(f.status == PASSED for name, f in findings.items() if name != "flower")
    assert "InANotebook" not in os.environ[REGISTERED_ENV]  # a child process could not import it


def test_an_announced_method_a_process_cannot_import_is_a_warning_not_an_error(registry):
    with pytest.warns(UserWarning, match="not available in this process"):
        algorithms.register_announced({REGISTERED_ENV: "ghost=no_such_module:Ghost"})
    assert "ghost" not in ALGORITHMS


@dataclass
class MutableConfig:
    beta: float = 0.9


@dataclass(frozen=True)
class NoDefaults:
    beta: float


@pytest.mark.parametrize("name, cls, message", [
    ("fedavg", FedAvgM, "algorithm name 'fedavg' is taken by fedkd_core.algorithms.fedavg.FedAvg"),
    ("mine", int, "is not a subclass of fedkd_core.algorithms.Algorithm"),
    ("mine", type("NoConfig", (algorithms.Algorithm,), {}), "Config must be a frozen dataclass"),
    ("mine", type("Mutable", (FedAvg,), {"Config": MutableConfig}), "Config must be a frozen dataclass"),
    ("mine", type("Bare", (FedAvg,), {"Config": NoDefaults}), "must build with no arguments"),
    ("mine", type("Wants", (FedAvg,), {"NEEDS": frozenset({"gpu"})}), "unknown NEEDS \\['gpu'\\]"),
    ("my method", FedAvgM, "must be an identifier"),
])
def test_register_refuses_with_a_clear_error(registry, name, cls, message):
    with pytest.raises(ValueError, match=message):
        register(name, cls)
    assert name not in ALGORITHMS or ALGORITHMS[name] is not cls


def test_registering_the_same_class_twice_is_harmless(registry):
    assert register("fedavgm_twice", FedAvgM) is FedAvgM
    assert register("fedavgm_twice", FedAvgM) is FedAvgM
    assert os.environ[REGISTERED_ENV].count("fedavgm_twice=") == 1


def test_majority_scores_are_what_always_answering_the_largest_class_scores():
    """By hand on a tiny split: each client's largest class, its share of the client's test set."""
    data = build_federated_data(tiny_config("fedavg").data, 0)
    labels, test_labels = data.dataset.y_train.numpy(), data.dataset.y_test.numpy()
    expected = np.mean([np.mean(test_labels[test] == np.bincount(labels[train], minlength=10).argmax())
                        for train, test in zip(data.client_train, data.client_test)])
    scores = majority_scores(data)
    assert scores["alma"] == pytest.approx(expected)
    assert 0.1 < scores["alma"] <= 1 and 0 < scores["global_acc"] < 0.2  # skewed clients, near-balanced test split
