"""The federated dataset: who holds which samples, what each client is tested on.

:func:`build_federated_data` turns a :class:`DataConfig` and a seed into a :class:`FederatedData`:
per-client training indices (from a partition of the training pool), per-client *local test
sets* drawn from the test pool with each client's class proportions (KnFu's ALMA, FedCKD's
average client accuracy), an optional shared transfer/public set disjoint from every client,
and the global test set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import partition
from .data import ImageDataset, check_dataset_name, load_dataset


@dataclass(frozen=True)
class DataConfig:
    """Which dataset, how it is split, and what is set aside.

    partition: one of :data:`PARTITIONS`; ``alpha`` is used by "dirichlet",
    ``classes_per_client`` by "pathological", ``major_classes``/``major_fraction`` by "step".
    samples_per_client: fixed client size (Dirichlet only, KnFu's |D_n|); None splits the pool.
    pool_size: partition only a seeded random subset of this many training samples (quick runs).
    transfer_size: labelled samples set aside before partitioning, shared by all clients.
    local_test_size: samples in each client's local test set.
    validation_fraction: for tuning (never for a reported number): this share of every client's
        training data is held out and becomes its "local test" set, scored on the training split,
        so a choice made on it never sees the test data. 0 (default) holds nothing out.
    """

    dataset: str = "mnist"
    num_clients: int = 20
    partition: str = "dirichlet"
    alpha: float = 0.5
    classes_per_client: int = 2
    major_classes: int = 2
    major_fraction: float = 0.8
    samples_per_client: int | None = None
    pool_size: int | None = None
    transfer_size: int = 0
    local_test_size: int = 500
    validation_fraction: float = 0.0

    def __post_init__(self) -> None:
        check_dataset_name(self.dataset)
        if self.partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {sorted(PARTITIONS)} (got {self.partition!r})")
        if not isinstance(self.num_clients, int) or self.num_clients < 1:
            raise ValueError(f"num_clients must be an integer >= 1 (got {self.num_clients!r})")
        if self.partition == "dirichlet":
            partition._check_alpha(self.alpha)
        if self.transfer_size < 0:
            raise ValueError(f"transfer_size must be >= 0 (got {self.transfer_size})")
        if self.local_test_size < 1:
            raise ValueError(f"local_test_size must be >= 1: an empty local test set gives no client accuracy "
                             f"(got {self.local_test_size})")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1) (got {self.validation_fraction})")
        if self.pool_size is not None and self.pool_size < self.num_clients:
            raise ValueError(
                f"pool_size must be >= num_clients={self.num_clients} (got {self.pool_size})"
            )


PartitionFn = Callable[[np.ndarray, DataConfig, int], list[np.ndarray]]

PARTITIONS: dict[str, PartitionFn] = {
    "dirichlet": lambda labels, c, seed: partition.dirichlet(
        labels, c.num_clients, c.alpha, seed=seed, samples_per_client=c.samples_per_client
    ),
    "pathological": lambda labels, c, seed: partition.pathological(
        labels, c.num_clients, c.classes_per_client, seed=seed
    ),
    "step": lambda labels, c, seed: partition.step(
        labels, c.num_clients, major_classes=c.major_classes, major_fraction=c.major_fraction,
        seed=seed,
    ),
    "iid": lambda labels, c, seed: partition.iid(labels, c.num_clients, seed=seed),
}


@dataclass(frozen=True)
class FederatedData:
    """Index sets into one :class:`ImageDataset`; ``client_test`` and ``global_test`` index its
    ``test_split`` ("test"; "train" when they are validation sets held out of the clients' data)."""

    dataset: ImageDataset
    config: DataConfig
    client_train: list[np.ndarray]
    client_test: list[np.ndarray]
    transfer: np.ndarray
    global_test: np.ndarray
    test_split: str = "test"

    @property
    def num_clients(self) -> int:
        return len(self.client_train)

    @property
    def num_classes(self) -> int:
        return self.dataset.num_classes

    def train_histograms(self) -> np.ndarray:
        return partition.class_histograms(self.dataset.y_train.numpy(), self.client_train, self.num_classes)

    def test_histograms(self) -> np.ndarray:
        return partition.class_histograms(self.dataset.y_test.numpy(), self.client_test, self.num_classes)


def build_federated_data(config: DataConfig, seed: int, dataset: ImageDataset | None = None) -> FederatedData:
    """Partition ``config.dataset`` among clients; everything is drawn from ``seed``."""
    dataset = dataset or load_dataset(config.dataset)
    rng = np.random.default_rng([seed, 1])  # own stream, independent of model init and training
    y_train = dataset.y_train.numpy()
    order = rng.permutation(len(y_train))
    transfer, rest = order[: config.transfer_size], order[config.transfer_size:]
    if config.pool_size is not None:
        rest = rest[: config.pool_size]
    if config.num_clients > len(rest):
        raise ValueError(
            f"num_clients must be <= the {len(rest)} training samples left for clients "
            f"(got {config.num_clients})"
        )
    parts = PARTITIONS[config.partition](y_train[rest], config, int(rng.integers(2**31)))
    client_train = [np.sort(rest[p]) for p in parts]
    if config.validation_fraction > 0:
        return with_validation_sets(dataset, config, client_train, np.sort(transfer), seed)
    histograms = partition.class_histograms(y_train, client_train, dataset.num_classes)
    client_test = local_test_sets(histograms, dataset.y_test.numpy(), config.local_test_size, rng)
    return FederatedData(
        dataset=dataset,
        config=config,
        client_train=client_train,
        client_test=client_test,
        transfer=np.sort(transfer),
        global_test=np.arange(len(dataset.y_test)),
    )


def with_validation_sets(dataset: ImageDataset, config: DataConfig, client_train: list[np.ndarray],
                         transfer: np.ndarray, seed: int) -> FederatedData:
    """Hold out ``validation_fraction`` of every client's training data (at least one sample when
    it has two or more; a seeded draw of its own) as its validation set: the clients train on the
    rest and are scored on it, on the training split; the "global test" is their union."""
    rng = np.random.default_rng([seed, 6])
    kept, held_out = [], []
    for indices in client_train:
        count = max(0, min(max(1, int(round(config.validation_fraction * len(indices)))), len(indices) - 1))
        order = rng.permutation(len(indices))
        held_out.append(np.sort(indices[order[:count]]))
        kept.append(np.sort(indices[order[count:]]))
    return FederatedData(dataset=dataset, config=config, client_train=kept, client_test=held_out,
                         transfer=transfer, global_test=np.sort(np.concatenate(held_out)), test_split="train")


def local_test_sets(
    train_histograms: np.ndarray, test_labels: np.ndarray, size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """For each client, ``size`` test samples whose class mix follows its training histogram.

    Class counts are the largest-remainder rounding of ``size * proportions``; samples are drawn
    without replacement within a client (clients may share test samples, as they share the pool).
    A class asking for more than the pool holds takes the whole class.
    """
    pools = {c: np.flatnonzero(test_labels == c) for c in range(train_histograms.shape[1])}
    tests = []
    for histogram in train_histograms:
        if histogram.sum() == 0:  # a client without training data has nothing to be tested on
            tests.append(np.array([], dtype=np.int64))
            continue
        counts = _largest_remainder(histogram / histogram.sum(), size)
        picked = [
            rng.choice(pools[c], size=min(n, len(pools[c])), replace=False)
            for c, n in enumerate(counts)
            if n > 0
        ]
        tests.append(np.sort(np.concatenate(picked)) if picked else np.array([], dtype=np.int64))
    return tests


def _largest_remainder(proportions: np.ndarray, total: int) -> np.ndarray:
    raw = proportions * total
    counts = np.floor(raw).astype(int)
    shortfall = total - counts.sum()
    counts[np.argsort(-(raw - counts), kind="stable")[:shortfall]] += 1
    return counts
