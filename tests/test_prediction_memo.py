"""The evaluation memo: unchanged models are not scored again, and nothing else changes."""

import numpy as np
import pytest
import torch

from fedkd_core.experiment import ExperimentConfig, simulate
from fedkd_core.federation import DataConfig
from fedkd_core.prediction_memo import PredictionMemo
from fedkd_core.training import TrainConfig


class Scorer:
    """What ``outcome`` falls back on: counts its calls, and scores with the model's own weights."""

    def __init__(self, model, indices):
        self.model, self.indices, self.calls = model, indices, 0

    def __call__(self):
        self.calls += 1
        with torch.no_grad():
            return (self.model(torch.as_tensor(self.indices, dtype=torch.float32)[:, None]) > 0).numpy().ravel()


def model_and_scorer(indices=np.arange(-5, 6)):
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.5)
    return model, Scorer(model, indices)


def ask(memo, model, scorer):
    return memo.outcome(model, scorer.indices, "test", "False", scorer)


def test_an_unchanged_model_on_the_same_samples_is_scored_once():
    memo = PredictionMemo()
    model, scorer = model_and_scorer()
    first = ask(memo, model, scorer)
    memo.start_evaluation()
    model.train()
    again = ask(memo, model, scorer)
    assert scorer.calls == 1 and (memo.hits, memo.misses) == (1, 1)
    np.testing.assert_array_equal(first, again)
    assert not model.training  # left in eval mode, as scoring leaves it


def test_a_weight_changed_behind_autograds_back_is_scored_again():
    """``.data`` writes do not move a tensor's version counter: the memo reads the bytes."""
    memo = PredictionMemo()
    model, scorer = model_and_scorer()
    before = ask(memo, model, scorer)
    memo.start_evaluation()
    model.bias.data.copy_(torch.tensor([-2.5]))
    after = ask(memo, model, scorer)
    assert scorer.calls == 2
    assert before.sum() == 6 and after.sum() == 3  # x + 0.5 > 0 for x >= 0; x - 2.5 > 0 for x >= 3


def test_other_samples_other_split_or_precision_are_scored_again():
    memo = PredictionMemo()
    model, scorer = model_and_scorer()
    ask(memo, model, scorer)
    memo.outcome(model, scorer.indices[:4], "test", "False", scorer)
    memo.outcome(model, scorer.indices, "train", "False", scorer)
    memo.outcome(model, scorer.indices, "test", "True", scorer)
    assert scorer.calls == 4


def test_outcomes_not_asked_for_in_an_evaluation_are_forgotten():
    memo = PredictionMemo()
    model, scorer = model_and_scorer()
    ask(memo, model, scorer)
    memo.start_evaluation()
    memo.start_evaluation()  # an evaluation that did not score this model
    ask(memo, model, scorer)
    assert scorer.calls == 2


def test_a_caller_cannot_change_the_kept_outcome():
    memo = PredictionMemo()
    model, scorer = model_and_scorer()
    ask(memo, model, scorer)[:] = False
    memo.start_evaluation()
    assert ask(memo, model, scorer).sum() == 6 and scorer.calls == 1


def test_models_off_the_host_are_always_scored():
    memo = PredictionMemo()
    model = torch.nn.Linear(1, 1, device="meta")
    calls = []
    for _ in range(2):
        memo.outcome(model, np.arange(3), "test", "False", lambda: calls.append(1) or np.ones(3, bool))
        memo.start_evaluation()
    assert len(calls) == 2 and memo.hits == 0


class Scaled(torch.nn.Module):
    """A view of a network whose output depends on a plain attribute, not on its state (as
    FjORD's ``AtWidth`` view depends on its width)."""

    def __init__(self, model, factor):
        super().__init__()
        self.model, self.factor = model, factor

    def forward(self, x):
        return self.model(x) * self.factor


def test_two_views_of_one_network_with_different_settings_are_scored_apart():
    memo = PredictionMemo()
    model, _ = model_and_scorer()
    views = [Scaled(model, 1.0), Scaled(model, -1.0)]
    outcomes = [memo.outcome(view, np.arange(-5, 6), "test", "False", Scorer(view, np.arange(-5, 6)))
                for view in views]
    assert outcomes[0].sum() == 6 and outcomes[1].sum() == 5  # the second view is not handed the first's outcome


@pytest.mark.parametrize("algorithm", ["pfedsd", "fedavg"])
def test_a_run_with_partial_participation_has_the_same_history_with_the_memo(monkeypatch, algorithm):
    """At r = 0.2 the clients that sit a round out keep their models (pFedSD), so the memo skips
    them, and every round's scores equal those of scoring every model again. FedAvg changes its
    one global model in place every round: a memo keyed on the model object would hand it last
    round's outcome."""
    from fedkd_core import experiment

    class Counting(PredictionMemo):
        made = []

        def __init__(self):
            super().__init__()
            Counting.made.append(self)

    class Forgetful(PredictionMemo):
        def outcome(self, model, indices, split, setting, score):
            return score()

    # 500 global test images, not the whole split (10,000 images a round were nine tenths of the
    # run): the memo is keyed on the model and the samples, whatever their number.
    config = ExperimentConfig(algorithm=algorithm, model="knfu_m1", rounds=4, participation=0.2, seed=3,
                              data=DataConfig("mnist", num_clients=10, samples_per_client=200, local_test_size=30),
                              train=TrainConfig(batch_size=20, lr=0.05, mixed_precision=False),
                              global_test_size=500)
    monkeypatch.setattr(experiment, "PredictionMemo", Counting)
    with_memo = simulate(config, progress=False)["history"]
    monkeypatch.setattr(experiment, "PredictionMemo", Forgetful)
    without = simulate(config, progress=False)["history"]
    scores = ("alma", "client_accuracies", "global_acc")
    assert [[row[k] for k in scores] for row in with_memo] == [[row[k] for k in scores] for row in without]
    assert len({row["alma"] for row in with_memo}) > 1  # the models changed: a stale memo would show
    if algorithm == "fedavg":
        assert len({row["global_acc"] for row in with_memo}) > 1  # so would a stale outcome of the global model
    if algorithm == "pfedsd":
        assert Counting.made[-1].hits >= 4  # personal models of clients that sat a round out were not scored again
