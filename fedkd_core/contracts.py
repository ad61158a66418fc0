"""The contracts as code: what an algorithm is and what a chapter module is, each member documented once.

Nothing here runs an experiment. :class:`AlgorithmProtocol` is what the simulation loop
(``fedkd_core.experiment``), Flower's client replicas (``fedkd_core.flower``) and the checkpoints
ask of a method; :class:`fedkd_core.algorithms.Algorithm` implements every member but the steps a
method must write. ``fedkd_core.conformance.check`` tests a method against it on real data.

A chapter module is used through layers of members, each a protocol below: every chapter is a
:class:`ChapterProtocol` (the notebook and the sweep); one that shows records of another profile
for the cells they cover is also a :class:`RecordReusingChapter`; one whose claims the ledger
judges a :class:`ClaimsChapter` (``fedkd_core.chapters.ledger``, ``fedkd_core.compare``); one with a
robustness grid a :class:`RobustChapter` (``fedkd_core.chapters.robustness``).
:func:`missing_members` names what a module lacks of one of them.

What a method may need from a chapter's runs (``Algorithm.NEEDS``) is :data:`NEEDS`: each need is
checked on the run's config before anything trains, with an error naming what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

Message = dict  # name -> torch.Tensor; its bytes are what a run counts as traffic


@runtime_checkable
class AlgorithmProtocol(Protocol):
    """A federated method: the steps a round calls, and its clients' state as messages.

    A round (``experiment._run_round``): ``begin_round``; per selected client ``download`` then
    (on that client) ``client_update``; ``server_update`` on the uploads; per client ``reply``
    and, where it is not None, (on that client) ``client_finish``. Then every client is scored
    with ``personal_model`` on its local test set (ALMA) and ``global_model`` on the test split.
    A client step may run on another copy of the algorithm, in another process (Flower): it may
    use only the message it gets and its own state (``CLIENT_STATE``), never the server's
    attributes, and the server only what the uploads carry.
    """

    Config: ClassVar[type]
    """A frozen dataclass of the method's settings, every field with a default; its fields are
    ``ExperimentConfig.algorithm_params``, so they key the records (a new field changes every key
    unless ``results.ADDED_FIELDS`` names its old value)."""

    CLIENT_STATE: ClassVar[tuple[str, ...]]
    """Attributes holding what a client keeps between rounds: each a dict from client to a model
    or tensor, or a ``PersonalModels``. Everything else is the server's or scratch."""

    NEEDS: ClassVar[frozenset[str]]
    """What the method needs from a run's config, names from :data:`NEEDS` (e.g.
    ``{"transfer_set"}``); checked before a comparison runs it."""

    config: Any
    """The method's ``Config`` instance for this run."""

    ctx: Any
    """The run's ``algorithms.Context``: data, model recipe (``new_model``), training settings, device, seed."""

    round: int
    """The round in progress (set by ``begin_round``); randomness is drawn per (seed, round, party)."""

    def begin_round(self, round_index: int) -> None:
        """Start round ``round_index`` (1-based) on this copy; called on the server and on every replica."""

    def download(self, client: int) -> Message:
        """The server's message to ``client`` at the start of the round."""

    def client_update(self, client: int, message: Message) -> Message:
        """The client's work on what it downloaded; returns its upload. Draw randomness from
        ``self.generator(client)`` / ``self.rng(client)`` only."""

    def server_update(self, uploads: dict[int, Message]) -> None:
        """The server's work on the round's uploads (client -> message)."""

    def reply(self, client: int) -> Message | None:
        """A second message to ``client`` after the server's work (KnFu's fused soft labels), or None."""

    def client_finish(self, client: int, message: Message) -> None:
        """The client's use of the server's reply (two-exchange methods only)."""

    def personal_model(self, client: int) -> Any:
        """The model ``client`` is scored with on its local test set (ALMA)."""

    def global_model(self) -> Any | None:
        """The server's model, scored on the test split; None for a method without one."""

    def client_state(self, client: int) -> Message:
        """What ``client`` keeps between rounds, as a message (``field/name`` -> tensor)."""

    def load_client_state(self, client: int, state: Message) -> None:
        """Restore what ``client_state`` returned, on this or another copy."""

    def drop_client_state(self, client: int) -> None:
        """Forget ``client``'s state on this copy (a replica serving many clients keeps none)."""

    def round_metrics(self) -> dict:
        """Plain-data diagnostics of the last round, stored in the record's history ({} by default)."""


# --- chapters ----------------------------------------------------------------------------------

@runtime_checkable
class ChapterProtocol(Protocol):
    """Every chapter of the book: its notebook's parameters and the runs they mean."""

    Params: type
    """A frozen dataclass of the notebook's flat parameters (str, int, float, bool); its defaults
    are the seconds-long smoke profile and equal the notebook's parameters cell (a test checks)."""

    def experiments(self, params: Any) -> list:
        """Every ``ExperimentConfig`` of the chapter's grid for ``params``, each once, seed-major."""


@runtime_checkable
class RecordReusingChapter(ChapterProtocol, Protocol):
    """A chapter that shows committed records of a reference profile (paper or reduced) for the
    cells they cover, instead of running them (``fedkd_core.chapters.uncovered``)."""

    SCALE_FIELDS: frozenset
    """The ``Params`` fields that only set a run's size or which cells run; two Params agreeing on
    every other field run the same method, so a record of one may stand for a cell of the other."""

    def experiments_to_run(self, params: Any) -> list:
        """What the notebook (and the sweep) runs: the grid less the cells committed records cover."""

    def cell_of(self, run: Any) -> tuple:
        """The cell of an ``ExperimentConfig`` or a record: what a table cell holds whatever the scale."""

    def method_differences(self, params: Any) -> list[str]:
        """The method fields in which ``params`` differs from the reference profile; with any, no
        reference record stands for a cell of ``params``."""


@runtime_checkable
class ClaimsChapter(ChapterProtocol, Protocol):
    """A paper chapter whose claims the ledger judges and against whose methods
    ``fedkd_core.compare`` ranks a new one."""

    EFFECT_CELL_KEYS: tuple[str, ...]
    """The columns of :meth:`observations` that name a cell (one setting of the paper's tables)."""

    METHOD_COLUMN: str
    """The column of :meth:`observations` that names the method of a run."""

    PAPER_RUNS: int
    """The runs assumed behind each mean ± std the paper prints (for its side's intervals)."""

    def observations(self, records: list) -> Any:
        """One row per run: ``EFFECT_CELL_KEYS``, ``METHOD_COLUMN``, seed, the chapter's metric at
        the last evaluation ("final") and at the best ("best"), evaluations, late gain (points)."""

    def paper_observations(self) -> Any:
        """The paper's tables in :meth:`observations`' columns with ``mean`` and ``std`` (%)."""

    def effects_of(self, frame: Any, value: str = "final") -> Any:
        """Per cell and seed, one column per claim: its effect on ``value``, positive where it
        holds; a claim whose methods are missing from ``frame`` is left out. A seed's effects read
        only that seed's rows (a verdict's perturbations go in as copies of the table under their
        own seeds: ``verdict_gate.effects_of_each``)."""

    def claim_effects(self, records: list) -> Any:
        """``effects_of(observations(records), "final")``."""

    def ledger_rows(self, root: Any = None) -> Any:
        """The chapter's claims for the Claims page (``ledger.COLUMNS``), judged on committed records."""


@runtime_checkable
class RobustChapter(ClaimsChapter, Protocol):
    """A chapter whose claims are also judged under each reading of what its paper leaves open."""

    ROBUSTNESS: tuple
    """``robustness.Variant``s: a name, the ``Params`` fields it changes, and why; the first is
    the chapter's own reading (no overrides)."""

    ROBUSTNESS_BASE: Any
    """The ``Params`` the variants change (its yaml is ``notebooks/params/robustness/<chapter>.yaml``).
    A chapter whose grid moves with its verdicts onto a rerun also defines ``robustness_grid(root)``
    (``chapters.robustness.Grid``; FedGMKD's moves to 50 rounds)."""


def missing_members(obj: Any, protocol: type) -> list[str]:
    """The members of ``protocol`` (and the protocols it extends) that ``obj`` lacks, sorted."""
    members = set()
    for base in protocol.__mro__:
        if base is object or base is Protocol or not getattr(base, "_is_protocol", False):
            continue
        members |= {name for name in vars(base).get("__annotations__", {})}
        members |= {name for name, value in vars(base).items() if callable(value) and not name.startswith("_")}
    return sorted(name for name in members if not hasattr(obj, name))


# --- what a method may need from a run ------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """One thing a method may need from a run: what it means, the test on an ``ExperimentConfig``,
    and how to get it when a chapter's runs lack it."""

    name: str
    meaning: str
    holds: Callable[[Any], bool]
    remedy: str


NEEDS: dict[str, Need] = {need.name: need for need in (
    Need("transfer_set", "a shared set of samples no client holds (DataConfig.transfer_size > 0)",
         lambda config: config.data.transfer_size > 0,
         "compare on a chapter whose runs set one aside (knfu, fedua, fedgmkd) or give the chapter a "
         "transfer_size (-p transfer_size N) where it has that parameter"),
    Need("full_participation", "every client takes part in every round (participation 1)",
         lambda config: config.participation == 1.0,
         "compare on cells at participation 1 (e.g. FedUA: -p participations 1.0)"),
)}


def check_needs(name: str, needs, configs: list) -> None:
    """A ValueError naming the first need of method ``name`` that a config of ``configs`` lacks,
    what it means, how many runs lack it, and what to do; an unknown need is one too."""
    unknown = sorted(set(needs) - set(NEEDS))
    if unknown:
        raise ValueError(f"{name} declares unknown NEEDS {unknown}; the known ones are {sorted(NEEDS)}")
    for need in (NEEDS[n] for n in sorted(needs)):
        lacking = [config for config in configs if not need.holds(config)]
        if lacking:
            raise ValueError(f"{name} needs {need.name} ({need.meaning}), which {len(lacking)} of the "
                             f"{len(configs)} runs lack: {need.remedy}")
