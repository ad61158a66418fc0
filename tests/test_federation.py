"""The federated dataset: transfer set disjoint from clients, local tests follow client mixes."""

import numpy as np
import pytest

from fedkd_core.federation import DataConfig, build_federated_data, local_test_sets


def test_local_test_sets_follow_each_clients_class_proportions():
    rng = np.random.default_rng(0)
    test_labels = np.repeat(np.arange(4), 100)
    histograms = np.array([[30, 10, 0, 0], [0, 0, 5, 5], [1, 1, 1, 1]])
    tests = local_test_sets(histograms, test_labels, 40, rng)
    counts = np.stack([np.bincount(test_labels[t], minlength=4) for t in tests])
    assert counts.tolist() == [[30, 10, 0, 0], [0, 0, 20, 20], [10, 10, 10, 10]]
    assert all(len(np.unique(t)) == len(t) for t in tests)


def test_build_sets_transfer_apart_and_draws_local_tests(mnist):
    config = DataConfig("mnist", num_clients=8, alpha=0.2, samples_per_client=150, transfer_size=300,
                        local_test_size=120)
    data = build_federated_data(config, seed=0, dataset=mnist)
    clients = np.concatenate(data.client_train)
    assert len(np.intersect1d(clients, data.transfer)) == 0
    assert len(data.transfer) == 300 and len(np.unique(clients)) == 8 * 150
    train_share = data.train_histograms() / 150
    test_share = data.test_histograms() / 120
    assert np.abs(train_share - test_share).max() <= 1 / 120 + 1e-9


def test_build_is_deterministic_for_a_seed(mnist):
    config = DataConfig("mnist", num_clients=5, alpha=0.5, samples_per_client=50, transfer_size=20)
    a, b = build_federated_data(config, 3, mnist), build_federated_data(config, 3, mnist)
    assert all(np.array_equal(x, y) for x, y in zip(a.client_train + a.client_test, b.client_train + b.client_test))
    assert np.array_equal(a.transfer, b.transfer)


def test_pool_size_limits_what_clients_share(mnist):
    data = build_federated_data(DataConfig("mnist", num_clients=4, partition="iid", pool_size=400), 0, mnist)
    assert sum(len(p) for p in data.client_train) == 400


@pytest.mark.parametrize("kwargs, parameter", [
    ({"alpha": -0.5}, "alpha"),
    ({"num_clients": 0}, "num_clients"),
    ({"dataset": "imagenet"}, "dataset"),
    ({"partition": "random"}, "partition"),
    ({"transfer_size": -1}, "transfer_size"),
])
def test_bad_data_config_names_the_parameter(kwargs, parameter):
    with pytest.raises(ValueError, match=parameter):
        DataConfig(**kwargs)


def test_more_clients_than_samples_is_a_clear_error(mnist):
    with pytest.raises(ValueError, match="num_clients"):
        build_federated_data(DataConfig("mnist", num_clients=70_000, partition="iid"), 0, mnist)
