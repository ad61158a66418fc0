"""Each chapter's experiment grid, shared by its notebook and by ``python -m fedkd_core.sweep``.

A chapter module defines ``Params`` (a frozen dataclass of the notebook's flat parameters) and
``experiments(params) -> list[ExperimentConfig]``, its grid. A chapter whose notebook shows part
of the grid from elsewhere (KnFu: cells that committed paper-profile records cover; FedUA, FedGMKD
and FedCKD: cells that committed reduced-profile records cover, see :func:`reuses_reduced`) also defines
``experiments_to_run(params)``, what its notebook actually runs; the sweep runs that.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import typing
from types import ModuleType

from ..results import EXECUTION_SETTINGS

CHAPTERS: dict[str, str] = {
    "setting": "fedkd_core.chapters.setting",
    "scaling": "fedkd_core.chapters.scaling",
    "knfu": "fedkd_core.chapters.knfu",
    "fedckd": "fedkd_core.chapters.fedckd",
    "fedua": "fedkd_core.chapters.fedua",
    "fedgmkd": "fedkd_core.chapters.fedgmkd",
    "claims": "fedkd_core.chapters.ledger",
    "add_your_method": "fedkd_core.chapters.add_your_method",
}


def chapter_module(name: str) -> ModuleType:
    if name not in CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(CHAPTERS)} (got {name!r})")
    return importlib.import_module(CHAPTERS[name])


def experiments_to_run(module: ModuleType, params) -> list:
    """The runs a chapter's notebook makes for ``params`` (its whole grid unless it says less)."""
    chosen = getattr(module, "experiments_to_run", module.experiments)
    return chosen(params)


# Fields that say how a run executes, not what it computes (the ones a record's key leaves out,
# fedkd_core.results.EXECUTION_SETTINGS): a record made in fp32 stands for a cell a bf16 run would make.
EXECUTION_FIELDS = frozenset(name for _, name in EXECUTION_SETTINGS)


def method_differences(params, reference, scale_fields: frozenset[str]) -> list[str]:
    """The fields outside ``scale_fields`` (those that only set a run's size or which cells run)
    and :data:`EXECUTION_FIELDS` in which ``params`` differs from ``reference``: empty when both
    run the same method, so that a record made with ``reference`` may stand for a cell of ``params``."""
    ignored = scale_fields | EXECUTION_FIELDS
    return [f.name for f in dataclasses.fields(params)
            if f.name not in ignored and getattr(params, f.name) != getattr(reference, f.name)]


def reuses_reduced(params, differences: list[str]) -> bool:
    """Whether a notebook run of ``params`` shows committed records of the chapter's reduced profile
    for the cells they cover instead of running those cells: only when ``params.reuse_reduced`` is
    on, ``params`` runs the reduced profile's method (``differences`` from
    :func:`method_differences` is empty), and is not itself the reduced or paper profile (those
    run their whole grid).

    A run named ``profile="reduced"`` whose method differs is a ValueError: its records would sit
    beside the committed reduced ones under the same label and be averaged with them."""
    if params.profile == "reduced" and differences:
        raise ValueError(f"profile 'reduced' names the committed reduced-profile runs, but these parameters differ "
                         f"from them in {', '.join(differences)}; give such runs another profile name "
                         "(-p profile custom)")
    return params.reuse_reduced and not differences and params.profile not in ("reduced", "paper")


def reuse_message(params, differences: list[str], reference: str = "reduced") -> str:
    """What a notebook prints when ``params`` runs another method than the ``reference`` profile
    (``differences`` from :func:`method_differences`), so that none of that profile's records
    stand for its cells; empty when they may, or when ``params`` is itself the reference or paper
    profile (those run their whole grid anyway)."""
    if not differences or params.profile in (reference, "paper"):
        return ""
    return (f"Every run of this profile ran here: its settings ({', '.join(differences)}) differ from the "
            f"committed {reference} runs, so none of those is reused for it.")


def uncovered(configs: list, records: list, cell_of) -> list:
    """The ``configs`` whose cell (``cell_of`` of a config or a record) no record covers."""
    covered = {cell_of(record) for record in records}
    return [config for config in configs if cell_of(config) not in covered]


def parameters_cell(params_class: type) -> str:
    """The source of a chapter notebook's papermill ``parameters`` cell: one ``name = default`` line
    per field of its ``Params``, in field order, so that the cell is the smoke profile by
    construction (``tools/sync_notebooks.py`` writes it; :func:`notebook_params` reads it back)."""
    return "\n".join(f"{field.name} = {_literal(field.default)}" for field in dataclasses.fields(params_class))


def _literal(value) -> str:
    """``value`` as Python source: strings in double quotes, as the notebooks write them."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


# Names IPython itself puts into a notebook's namespace.
IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def notebook_params(params_class: type, namespace: dict):
    """The chapter's ``Params`` from a notebook's global variables (its parameters cell plus
    whatever papermill injected), checked by :func:`chapter_params`: a misspelt ``papermill -p
    alpha 0.1`` is a ValueError naming the chapter's real parameters, where papermill alone would
    only warn and run with the defaults.
    """
    given = {
        key: value for key, value in namespace.items()
        if not key.startswith("_") and key not in IPYTHON_NAMES
        and not isinstance(value, ModuleType) and not callable(value)
    }
    return chapter_params(params_class, given)


def chapter_params(params_class: type, given: dict):
    """The chapter's ``Params`` from ``given`` (papermill's parameters, or a sweep's YAML): one
    ValueError naming a parameter the chapter does not have (with the names it may have meant),
    one of the wrong type, or one whose value makes the runs meaningless (:data:`LOWER_BOUNDS`)."""
    if not isinstance(given, dict):
        raise ValueError(f"parameters must be a mapping of names to values (got {type(given).__name__})")
    names = {f.name for f in dataclasses.fields(params_class)}
    unknown = sorted(set(given) - names)
    if unknown:
        hints = [f"{u!r} (did you mean {', '.join(map(repr, m))}?)" if (m := difflib.get_close_matches(u, names, 2, 0.5))
                 else repr(u) for u in unknown]
        raise ValueError(f"unknown parameter(s) {', '.join(hints)}; this chapter's parameters are {sorted(names)}")
    types = typing.get_type_hints(params_class)
    for name, value in given.items():
        check_type(name, value, types[name])
        check_lower_bound(name, value)
    return params_class(**given)


# What a parameter of each annotated type accepts. A str parameter is often a comma-separated
# list, which papermill passes as a number when it holds one (-p alphas 0.1).
ACCEPTED_TYPES = {int: (int,), float: (int, float), str: (str, int, float), bool: (bool,)}
TYPE_WORDS = {int: "an integer", float: "a number", str: "a string (a list is one comma-separated string)",
              bool: "True or False"}


def check_type(name: str, value, annotation) -> None:
    """A ValueError naming parameter ``name`` when ``value`` is not of its ``annotation`` (int,
    float, str, bool or a union of them; bool is no integer here)."""
    members = typing.get_args(annotation) or (annotation,)
    accepted = tuple(kind for member in members for kind in ACCEPTED_TYPES.get(member, (member,)))
    if not isinstance(value, accepted) or (isinstance(value, bool) and bool not in members):
        expected = " or ".join(TYPE_WORDS.get(member, member.__name__) for member in members)
        raise ValueError(f"parameter {name!r} must be {expected} (got {value!r}, a {type(value).__name__})")


# Parameters several chapters share, the least value that gives a meaningful run, and why.
LOWER_BOUNDS = {
    "local_epochs": (1, "with no local epoch the clients never train"),
    "local_test_size": (1, "an empty local test set gives no client accuracy (ALMA would be NaN)"),
    "global_test_size": (0, "it is a number of test samples (0: the whole test split)"),
    "samples_per_client": (0, "it is a number of samples (0: split the whole pool)"),
    "transfer_size": (0, "it is a number of samples"),
    "seeds": (1, "a cell needs at least one seed"),
}  # rounds, num_clients, batch_size, ...: the run's own configs refuse them, naming the field


def check_lower_bound(name: str, value) -> None:
    if name in LOWER_BOUNDS and isinstance(value, (int, float)) and not isinstance(value, bool):
        least, reason = LOWER_BOUNDS[name]
        if value < least:
            raise ValueError(f"parameter {name!r} must be >= {least}: {reason} (got {value!r})")
