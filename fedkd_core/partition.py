"""Splitting a labelled pool among clients: Dirichlet, pathological, FedBE's step, IID.

Every function takes the label array of the pool and returns a list of disjoint numpy index
arrays, one per client, deterministic for a given ``seed`` (each call owns its own generator).
Class histograms of a partition come from :func:`class_histograms`.
"""

from __future__ import annotations

import numpy as np

# Dirichlet partitions without a fixed client size are redrawn until every client holds at least
# this many samples (the MOON / FedLab convention), or the pool is too small to ask for it.
MIN_CLIENT_SIZE = 10
MAX_REDRAWS = 1000


def _check_common(labels: np.ndarray, num_clients: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError("labels must be a non-empty 1-d array")
    if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
        raise ValueError(f"num_clients must be an integer >= 1 (got {num_clients!r})")
    if num_clients > len(labels):
        raise ValueError(
            f"num_clients must be <= the number of samples, {len(labels)} (got {num_clients})"
        )
    return labels


def _check_alpha(alpha: float) -> None:
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0 (got {alpha!r})")


def _class_pools(labels: np.ndarray, rng: np.random.Generator) -> dict[int, list[int]]:
    """Shuffled index lists per class, consumed from the end."""
    return {int(c): list(rng.permutation(np.flatnonzero(labels == c))) for c in np.unique(labels)}


def iid(labels, num_clients: int, *, seed: int) -> list[np.ndarray]:
    """Shuffle the pool and cut it into ``num_clients`` parts whose sizes differ by at most one."""
    labels = _check_common(labels, num_clients)
    rng = np.random.default_rng(seed)
    return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), num_clients)]


def dirichlet(
    labels, num_clients: int, alpha: float, *, seed: int, samples_per_client: int | None = None
) -> list[np.ndarray]:
    """Label skew drawn from Dir(alpha).

    Without ``samples_per_client`` (the whole pool is split): for each class, the shares of the
    clients are drawn from Dir(alpha * 1_N) and the class is cut accordingly. The draw is repeated
    until every client holds at least ``min(MIN_CLIENT_SIZE, len(labels) // num_clients)`` samples
    (the tiny-client rule), giving up with a ValueError after ``MAX_REDRAWS`` draws.

    With ``samples_per_client`` = n (KnFu's |D_n|): client k draws class proportions
    q_k ~ Dir(alpha * 1_C) and takes n samples with class counts ~ Multinomial(n, q_k), without
    replacement from what earlier clients left. If a class runs out, the client's missing samples
    are drawn from its other classes in proportion to q_k (classes it already holds first).
    """
    labels = _check_common(labels, num_clients)
    _check_alpha(alpha)
    rng = np.random.default_rng(seed)
    if samples_per_client is None:
        return _dirichlet_split_pool(labels, num_clients, alpha, rng)
    if samples_per_client < 1 or samples_per_client * num_clients > len(labels):
        raise ValueError(
            "samples_per_client must be >= 1 and samples_per_client * num_clients <= "
            f"{len(labels)} samples (got {samples_per_client} x {num_clients} clients)"
        )
    return _dirichlet_fixed_size(labels, num_clients, alpha, samples_per_client, rng)


def _dirichlet_split_pool(labels, num_clients, alpha, rng) -> list[np.ndarray]:
    min_size = min(MIN_CLIENT_SIZE, len(labels) // num_clients)
    classes = np.unique(labels)
    for _ in range(MAX_REDRAWS):
        parts: list[list[int]] = [[] for _ in range(num_clients)]
        for c in classes:
            members = rng.permutation(np.flatnonzero(labels == c))
            shares = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(int)
            for part, chunk in zip(parts, np.split(members, cuts)):
                part.extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(
        f"alpha={alpha} with num_clients={num_clients} left a client below {min_size} samples "
        f"in {MAX_REDRAWS} draws; use a larger alpha or fewer clients"
    )


def _dirichlet_fixed_size(labels, num_clients, alpha, n, rng) -> list[np.ndarray]:
    pools = _class_pools(labels, rng)
    classes = sorted(pools)
    parts = []
    for _ in range(num_clients):
        q = rng.dirichlet(np.full(len(classes), alpha))
        wanted = rng.multinomial(n, q)
        taken: list[int] = []
        for c, count in zip(classes, wanted):
            taken.extend(pools[c][len(pools[c]) - min(count, len(pools[c])):])
            del pools[c][len(pools[c]) - min(count, len(pools[c])):]
        while len(taken) < n:  # a class ran dry: refill from the classes still available
            available = np.array([len(pools[c]) > 0 for c in classes])
            weights = np.where(available, q + 1e-12, 0.0)
            c = classes[rng.choice(len(classes), p=weights / weights.sum())]
            taken.append(pools[c].pop())
        parts.append(np.sort(np.asarray(taken, dtype=np.int64)))
    return parts


def pathological(labels, num_clients: int, classes_per_client: int, *, seed: int) -> list[np.ndarray]:
    """Each client holds exactly ``classes_per_client`` classes (pFedSD / FedCKD's s).

    Classes are dealt to clients from a shuffled, repeated class list so that every class is
    held by as equal a number of clients as possible; each class's samples are then shuffled and
    cut into equal parts among its holders. The whole pool is used when every class is dealt.
    Tiny-client rule: none needed (every holder of a class gets an equal cut of it).
    """
    labels = _check_common(labels, num_clients)
    classes = np.unique(labels)
    if not 1 <= classes_per_client <= len(classes):
        raise ValueError(
            f"classes_per_client must be in [1, {len(classes)}] (got {classes_per_client})"
        )
    rng = np.random.default_rng(seed)
    deck: list[int] = []
    while len(deck) < num_clients * classes_per_client:
        deck.extend(rng.permutation(classes).tolist())
    holders: dict[int, list[int]] = {int(c): [] for c in classes}
    for k in range(num_clients):
        own = _deal_distinct(deck, classes_per_client)
        for c in own:
            holders[c].append(k)
    parts: list[list[int]] = [[] for _ in range(num_clients)]
    for c, clients in holders.items():
        if not clients:
            continue
        members = rng.permutation(np.flatnonzero(labels == c))
        for k, chunk in zip(clients, np.array_split(members, len(clients))):
            parts[k].extend(chunk.tolist())
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def _deal_distinct(deck: list[int], count: int) -> list[int]:
    """Take ``count`` distinct classes from the front of the deck (skipped cards stay in front)."""
    own: list[int] = []
    position = 0
    while len(own) < count:
        if deck[position] not in own:
            own.append(deck.pop(position))
        else:
            position += 1
    return own


def step(
    labels,
    num_clients: int,
    *,
    major_classes: int = 2,
    major_fraction: float = 0.8,
    seed: int,
) -> list[np.ndarray]:
    """FedBE's step split: each client has a few major classes and the rest as minor classes.

    Every client targets ``len(labels) // num_clients`` samples, ``major_fraction`` of them spread
    evenly over its ``major_classes`` classes (dealt so that every class is major for equally many
    clients) and the rest spread evenly over the other classes. Samples are drawn without
    replacement; a class that runs dry gives what it has left (the client is then smaller).
    """
    labels = _check_common(labels, num_clients)
    classes = np.unique(labels)
    if not 1 <= major_classes < len(classes):
        raise ValueError(f"major_classes must be in [1, {len(classes) - 1}] (got {major_classes})")
    if not 0.0 < major_fraction <= 1.0:
        raise ValueError(f"major_fraction must be in (0, 1] (got {major_fraction})")
    rng = np.random.default_rng(seed)
    pools = _class_pools(labels, rng)
    size = len(labels) // num_clients
    per_major = int(round(size * major_fraction / major_classes))
    per_minor = int(round(size * (1 - major_fraction) / (len(classes) - major_classes)))
    deck: list[int] = []
    while len(deck) < num_clients * major_classes:
        deck.extend(rng.permutation(classes).tolist())
    parts = []
    for _ in range(num_clients):
        majors = set(_deal_distinct(deck, major_classes))
        taken: list[int] = []
        for c in pools:
            count = min(per_major if c in majors else per_minor, len(pools[c]))
            taken.extend(pools[c][len(pools[c]) - count:])
            del pools[c][len(pools[c]) - count:]
        parts.append(np.sort(np.asarray(taken, dtype=np.int64)))
    return parts


def class_histograms(labels, parts: list[np.ndarray], num_classes: int) -> np.ndarray:
    """(clients, classes) matrix of sample counts."""
    labels = np.asarray(labels)
    return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])
