"""Partitions: disjoint, complete where promised, sized as stated, seeded, skewed as alpha falls."""

import numpy as np
import pytest

from fedkd_core import partition

LABELS = np.repeat(np.arange(10), 500)  # 5,000 samples, 500 per class


def assert_disjoint(parts):
    joined = np.concatenate(parts)
    assert len(joined) == len(np.unique(joined))


def mean_largest_share(parts, labels=LABELS):
    hist = partition.class_histograms(labels, parts, 10)
    return float((hist.max(1) / hist.sum(1)).mean())


@pytest.mark.parametrize("split", [
    lambda s: partition.iid(LABELS, 7, seed=s),
    lambda s: partition.dirichlet(LABELS, 10, 0.3, seed=s),
    lambda s: partition.pathological(LABELS, 10, 2, seed=s),
])
def test_splits_of_the_whole_pool_are_disjoint_and_complete(split):
    parts = split(0)
    assert_disjoint(parts)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(LABELS)))


def test_every_partition_is_deterministic_for_a_seed():
    for split in (
        lambda s: partition.dirichlet(LABELS, 10, 0.3, seed=s),
        lambda s: partition.dirichlet(LABELS, 10, 0.3, seed=s, samples_per_client=100),
        lambda s: partition.pathological(LABELS, 10, 2, seed=s),
        lambda s: partition.step(LABELS, 10, seed=s),
        lambda s: partition.iid(LABELS, 10, seed=s),
    ):
        first, again, other = split(1), split(1), split(2)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
        assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_iid_sizes_differ_by_at_most_one():
    sizes = [len(p) for p in partition.iid(LABELS, 7, seed=0)]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == len(LABELS)


def test_dirichlet_skew_grows_as_alpha_falls():
    shares = [np.mean([mean_largest_share(partition.dirichlet(LABELS, 10, a, seed=s)) for s in range(5)])
              for a in (100.0, 1.0, 0.1)]
    assert shares[0] < shares[1] < shares[2]
    assert shares[0] < 0.2  # near IID: the largest class is about a tenth
    assert shares[2] > 0.45  # Dir(0.1): one class holds about half of a client


def test_dirichlet_respects_the_tiny_client_rule():
    parts = partition.dirichlet(LABELS, 50, 0.1, seed=0)
    assert min(len(p) for p in parts) >= partition.MIN_CLIENT_SIZE


def test_dirichlet_fixed_size_gives_every_client_exactly_n_samples():
    parts = partition.dirichlet(LABELS, 20, 0.1, seed=0, samples_per_client=200)
    assert [len(p) for p in parts] == [200] * 20
    assert_disjoint(parts)
    assert mean_largest_share(parts) > 0.45


def test_dirichlet_fixed_size_refills_when_a_class_runs_dry():
    parts = partition.dirichlet(LABELS, 10, 0.01, seed=3, samples_per_client=490)
    assert [len(p) for p in parts] == [490] * 10
    assert_disjoint(parts)


def test_pathological_gives_each_client_exactly_its_classes():
    parts = partition.pathological(LABELS, 20, 2, seed=0)
    hist = partition.class_histograms(LABELS, parts, 10)
    assert ((hist > 0).sum(1) == 2).all()
    assert ((hist > 0).sum(0) == 4).all()  # 20 clients x 2 classes over 10 classes, evenly dealt


def test_step_split_has_two_major_classes_per_client():
    parts = partition.step(LABELS, 10, major_classes=2, major_fraction=0.8, seed=0)
    hist = partition.class_histograms(LABELS, parts, 10)
    top_two = np.sort(hist, 1)[:, -2:].sum(1) / hist.sum(1)
    assert np.allclose(top_two, 0.8, atol=0.02)
    assert ((hist > 0).sum(1) == 10).all()
    assert_disjoint(parts)


@pytest.mark.parametrize("call, parameter", [
    (lambda: partition.dirichlet(LABELS, 10, -1.0, seed=0), "alpha"),
    (lambda: partition.dirichlet(LABELS, 10, 0.0, seed=0), "alpha"),
    (lambda: partition.dirichlet(LABELS, 0, 0.5, seed=0), "num_clients"),
    (lambda: partition.iid(LABELS[:5], 6, seed=0), "num_clients"),
    (lambda: partition.dirichlet(LABELS, 10, 0.5, seed=0, samples_per_client=600), "samples_per_client"),
    (lambda: partition.pathological(LABELS, 10, 11, seed=0), "classes_per_client"),
    (lambda: partition.step(LABELS, 10, major_fraction=1.5, seed=0), "major_fraction"),
])
def test_bad_input_is_one_clear_value_error(call, parameter):
    with pytest.raises(ValueError, match=parameter):
        call()
