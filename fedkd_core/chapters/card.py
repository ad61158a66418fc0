"""What opens and closes every paper chapter besides its verdict: the paper's full reference with
its DOI or arXiv link and its claim as the paper states it (:data:`PAPERS`), the "Reproduce
this chapter" box (:func:`reproduce_box`): the set-up commands, the papermill command, the sweep
command of each profile, and each profile's measured compute time on named hardware, read from
the committed records' ``timings.total_seconds`` and ``environment.device_name`` (nothing typed),
and the hyperparameter table with one column per profile (:func:`settings_table`), so that the
profile behind the records shown is never mistaken for the one that executed the page.
"""

from __future__ import annotations

import re

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from ..cpuinfo import machine_text
from ..report import count_text

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "notebooks" / "params"
# The profiles in the order of their cost; "smoke" is the notebook's own defaults (no yaml).
PROFILES = ("smoke", "quick", "reduced", "paper", "tuning", "robustness")
PROFILE_TEXT = {
    "smoke": "the notebook's defaults: seconds, for CI",
    "quick": "what `make book` runs: minutes on a laptop CPU",
    "reduced": "the paper's setting at a smaller scale (data, rounds or model, as the chapter says)",
    "paper": "the paper's full settings",
    "tuning": "a choice made on a validation split held out of the clients' data (never the test data)",
    "robustness": "the claims' cells once per alternative reading of what the paper leaves open",
}


@dataclass(frozen=True)
class Paper:
    authors: str
    title: str
    venue: str
    link: str  # DOI or arXiv address
    claim: str  # the paper's own words

    def reference(self) -> str:
        """The full reference as markdown, linked."""
        return f"{self.authors}. *{self.title}*. {self.venue}. [{self.link.split('//', 1)[1]}]({self.link})"


PAPERS = {
    "knfu": Paper("S. J. Seyedmohammadi, S. K. Atapour, J. Abouei, A. Mohammadi", "KnFu: Effective Knowledge Fusion",
                  "arXiv preprint arXiv:2403.11892, 2024", "https://arxiv.org/abs/2403.11892",
                  "A key conclusion of the work is that in scenarios with large and highly heterogeneous local datasets, "
                  "local training could be preferable to knowledge fusion-based solutions."),
    "fedua": Paper("S.-M. Lee, J.-L. Wu", "FedUA: An Uncertainty-Aware Distillation-Based Federated Learning Scheme "
                   "for Image Classification", "Information 14(4), 234, 2023", "https://doi.org/10.3390/info14040234",
                   "A series of experiments on the image classification task confirms that our proposed model aggregation "
                   "scheme can effectively solve the problem of non-IID data, especially when affordable transmission "
                   "costs are limited."),
    "fedgmkd": Paper("J. Zhang, C. Shan, J. Han", "FedGMKD: An Efficient Prototype Federated Learning Framework through "
                     "Knowledge Distillation and Discrepancy-Aware Aggregation",
                     "Advances in Neural Information Processing Systems 37 (NeurIPS 2024)",
                     "https://openreview.net/forum?id=c3OZBJpN7M",
                     "This framework improves model performance by prototype-based distillation knowledge without relying "
                     "on public datasets and enhances both local and global accuracy across diverse data distributions."),
    "fedckd": Paper("P. Wang, B. Liu, W. Guo, Y. Li, S. Ge", "Towards Personalized Federated Learning via "
                    "Comprehensive Knowledge Distillation", "arXiv preprint arXiv:2411.03569, 2024",
                    "https://arxiv.org/abs/2411.03569",
                    "Our method, FedCKD, consistently outperforms other methods in various settings."),
}


def citation(chapter: str) -> str:
    """The chapter's paper as markdown: the reference, then its claim quoted."""
    paper = PAPERS[chapter]
    return f"{paper.reference()}\n\n> {paper.claim}"


def show_citation(chapter: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(citation(chapter)))


# --- the hyperparameter table, one column per profile -----------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One row of a chapter's hyperparameter table: what the paper states, how a profile's value is
    read from its ``Params`` (``read(params)``), and where the value comes from."""

    parameter: str
    paper: Any
    read: Callable[[Any], Any]
    source: str


def settings_table(settings: list[Setting], columns: dict[str, Any]) -> pd.DataFrame:
    """One row per :class:`Setting`: its parameter, the paper's value, each column's value (a
    column per entry of ``columns``, header → ``Params``, as :func:`.datafiles.profile_columns` gives them)
    and the source. Show it with ``tables.show(table, settings=["paper", *columns])``."""
    rows = [{"parameter": setting.parameter, "paper": setting.paper,
             **{header: setting.read(params) for header, params in columns.items()}, "source": setting.source}
            for setting in settings]
    return pd.DataFrame(rows, columns=["parameter", "paper", *columns, "source"])


# --- measured time per profile ---------------------------------------------------------------------

REDESIGN = "redesign"  # <profile>/redesign/<chapter>.yaml: a profile's redesign, swept before it replaces the profile


def profile_files(chapter: str, root: Path = PARAMS) -> dict[str, list[Path]]:
    """The yamls of each profile that has one for ``chapter``: ``<chapter>.yaml`` and its
    additions such as ``knfu_mnist5.yaml`` (more seeds); the smoke profile has none. A redesign
    under ``<profile>/redesign/`` is not the profile yet and is left out."""
    found = {profile: sorted((root / profile).glob(f"{chapter}.yaml")) + sorted((root / profile).glob(f"{chapter}_*.yaml"))
             for profile in PROFILES}
    return {profile: paths for profile, paths in found.items() if paths}


def rerun_files(chapter: str, root: Path = PARAMS) -> dict[str, list[Path]]:
    """The redesigns of ``chapter``'s profiles, ``<profile>/redesign/<chapter>.yaml``, by profile:
    reruns at a larger scale that the verdicts (or the robustness column) move onto once complete
    (:class:`~.ledger.Rerun`), swept beside the profile they rerun."""
    found = {profile: sorted((root / profile / "redesign").glob(f"{chapter}.yaml")) for profile in PROFILES}
    return {profile: paths for profile, paths in found.items() if paths}


def profile_records(chapter: str, profile: str, paths: list[Path], results=None) -> list:
    """The committed records of ``profile``'s grids for ``chapter`` (its robustness variants for
    the robustness profile), each once, nothing run."""
    from ..sweep import load_grid

    records = {}
    for path in paths:
        _, configs = load_grid(chapter, path, robustness=profile == "robustness")
        records.update(grid_records(stored_runs(configs, results), profile))
    return list(records.values())


@dataclass(frozen=True)
class StoredRun:
    """One planned run's committed files, found once: its config, its records and its divergences
    under every profile (:func:`fedkd_core.results.stored_paths` order, paper first)."""

    config: Any
    records: tuple
    diverged: tuple

    def folders(self) -> set[str]:
        """The profiles it is filed under (record or divergence)."""
        return {path.parent.parent.name for path in self.records + self.diverged}


def stored_runs(configs, results=None) -> list[StoredRun]:
    """:class:`StoredRun` of each config: its key computed once and its files globbed once, which the
    cost functions below then share (each used to hash and glob every config again: ~5 globs and
    4 hashes a config, over ~5,000 configs for the cost table)."""
    from ..results import DIVERGED_SUFFIX, RECORD_SUFFIX, config_hash, key_paths

    def found(config):
        key = config_hash(config)
        return StoredRun(config, tuple(key_paths(config.algorithm, key, RECORD_SUFFIX, results)),
                         tuple(key_paths(config.algorithm, key, DIVERGED_SUFFIX, results)))

    return [found(config) for config in configs]


def grid_records(runs: list[StoredRun], profile: str) -> dict:
    """The committed records of ``runs`` (:func:`stored_runs`) filed under ``results/<profile>/``, by
    key (the folder, not the record's own label: a superseded profile's records that a robustness
    grid still reads are filed under ``robustness/`` with their old label,
    ``tools/supersede_records.py``)."""
    from ..results import read_record

    filed = (next((p for p in run.records if p.parent.parent.name == profile), None) for run in runs)
    return {record.key: record for record in map(read_record, filter(None, filed))}


def measured_times(chapter: str, results=None, params_root: Path = PARAMS) -> pd.DataFrame:
    """Per profile of ``chapter`` and machine its records ran on: runs, the compute time they
    took (sum of ``timings.total_seconds``, hours) and the longest run (minutes)."""
    rows = []
    grids = [(profile, profile, paths) for profile, paths in profile_files(chapter, params_root).items()]
    grids += [(f"{profile}, rerun (redesign/{paths[0].name})", profile, paths)
              for profile, paths in rerun_files(chapter, params_root).items()]
    for label, profile, paths in grids:
        records = profile_records(chapter, profile, paths, results)
        for machine, group in pd.DataFrame(
                [{"machine": machine_text(r.environment.get("device_name")),
                  "threads": r.environment.get("threads"), "seconds": r.timings["total_seconds"]}
                 for r in records], columns=["machine", "threads", "seconds"]).groupby("machine"):
            threads = sorted({int(t) for t in group.threads.dropna()})
            per_run = "/".join(map(str, threads)) + (" thread" if threads == [1] else " threads") + " per run"
            rows.append({"profile": label, "machine": machine + (f", {per_run}" if threads else ""),
                         "runs": len(group), "compute (hours)": group.seconds.sum() / 3600,
                         "longest run (minutes)": group.seconds.max() / 60})
    return pd.DataFrame(rows, columns=["profile", "machine", "runs", "compute (hours)", "longest run (minutes)"])


def commands(chapter: str, params_root: Path = PARAMS) -> list[tuple[str, str]]:
    """(what, command) to set up, execute the chapter, and sweep each profile's grid."""
    lines = [("set up (Python 3.11: virtual environment, package)", "make setup"),
             ("datasets (offline copies, else downloaded)", "make data"),
             ("execute this chapter (quick profile) into a notebook",
              f".venv/bin/papermill notebooks/{chapter}.ipynb {chapter}-out.ipynb "
              f"-f notebooks/params/quick/{chapter}.yaml")]
    for profile, paths in profile_files(chapter, params_root).items():
        lines += [(f"{profile} profile{'' if path.stem == chapter else f' ({path.stem})'}: run its grid "
                   "(resumable; --workers N runs N at a time)", sweep_command(chapter, profile, path.name))
                  for path in paths]
    for profile, paths in rerun_files(chapter, params_root).items():
        moves = "the robustness column moves" if profile == "robustness" else "the verdicts move"
        lines += [(f"{profile} profile's rerun at a larger scale: run its grid ({moves} onto it once every run "
                   "is finished; resumable)", sweep_command(chapter, profile, f"redesign/{path.name}"))
                  for path in paths]
    return lines


def sweep_command(chapter: str, profile: str, name: str) -> str:
    """The sweep of ``notebooks/params/<profile>/<name>`` on 2 workers (a robustness grid's with
    ``--robustness``)."""
    flag = " --robustness" if profile == "robustness" else ""
    return f".venv/bin/python -m fedkd_core.sweep {chapter} --params notebooks/params/{profile}/{name}{flag} --workers 2"


def reproduce_html(chapter: str, times: pd.DataFrame, params_root: Path = PARAMS) -> str:
    """The "Reproduce this chapter" box: :func:`commands`, then :func:`measured_times`."""
    from ..tables import html

    script = "\n".join(f"# {what}\n{command}" for what, command in commands(chapter, params_root))
    profiles = "".join(f"<li><b>{p}</b>: {escape(PROFILE_TEXT[p])}</li>"
                       for p in ("smoke", *profile_files(chapter, params_root)))
    if len(times):
        table = html(times, digits={"compute (hours)": 2, "longest run (minutes)": 1})
        timing = ("<p>Measured: the compute time of the committed records of each profile, summed over its "
                  "runs (a sweep with <i>N</i> workers on <i>N</i> free cores takes about 1/<i>N</i> of it; "
                  "the same run on a GPU is faster).</p>" + table)
    else:
        timing = "<p>No committed records of this chapter's profiles yet: no measured time.</p>"
    return (f'<div class="fedkd-reproduce"><p><b>Reproduce this chapter.</b> Profiles:</p><ul>{profiles}</ul>'
            f"<pre>{escape(script)}</pre>{timing}"
            "<p>A rerun with other parameters: <code>-p NAME VALUE</code> after the papermill command "
            "(the parameters table lists their names).</p></div>")


def reproduce_box(chapter: str) -> pd.DataFrame:
    """Display the "Reproduce this chapter" box and return the measured times."""
    from IPython.display import HTML, display

    times = measured_times(chapter)
    display(HTML(reproduce_html(chapter, times)))
    return times


# --- the measured cost in each profile yaml's header ------------------------------------------------

COST_MARK = "# Measured cost"
COST_CONTINUED = "#   "  # the indented line that holds the figures
COST_FIGURES = r"#   \d+ (of \d+ )?runs?[:, ]"  # that line as grid_cost_text writes it ("#   28 of 51 runs: ...")


def chapter_of(path: Path) -> str:
    """The chapter a profile yaml belongs to: its stem (``fedckd.yaml``) or the longest chapter
    name its stem starts with, then ``_`` (``knfu_tuned.yaml``, ``add_your_method.yaml``)."""
    from . import CHAPTERS

    names = [name for name in CHAPTERS if path.stem == name or path.stem.startswith(name + "_")]
    if not names:
        raise ValueError(f"{path.name}: no chapter of {sorted(CHAPTERS)} is named by it")
    return max(names, key=len)


def runs_text(n: int) -> str:
    return count_text(n, "run")


def hours_by_machine(runs) -> dict[str, tuple[int, float]]:
    """machine -> (runs, hours of ``timings.total_seconds``) over ``runs`` (records, divergences),
    each machine as :func:`~fedkd_core.cpuinfo.machine_text` names it."""
    totals: dict[str, tuple[int, float]] = {}
    for run in runs:
        machine = machine_text(run.environment.get("device_name"))
        count, hours = totals.get(machine, (0, 0.0))
        totals[machine] = (count + 1, hours + run.timings.get("total_seconds", 0.0) / 3600)
    return totals


@dataclass(frozen=True)
class GridCost:
    """What a profile yaml's grid has cost: its committed records and diverged runs filed under its
    profile (a diverged run is finished, with no record; its wall time until it diverged is stored
    with it), and the runs it plans less those filed under another profile (:func:`filed_elsewhere`)."""

    records: list
    diverged: list
    planned: int

    @property
    def finished(self) -> int:
        return len(self.records) + len(self.diverged)

    def finished_text(self) -> str:
        """"46 of 51 runs (3 diverged)", ", complete" once every planned run is finished."""
        return (f"{self.finished} of {runs_text(self.planned)}" + (", complete" if self.finished == self.planned else "")
                + (f" ({len(self.diverged)} diverged)" if self.diverged else ""))

    def machines_text(self) -> str:
        """"17 runs, 13.7 h on AMD EPYC Zen 4; ..." over the records and the diverged runs."""
        return "; ".join(f"{runs_text(count)}, {hours:.1f} h on {machine}"
                         for machine, (count, hours) in sorted(hours_by_machine(self.records + self.diverged).items()))


def grid_cost_text(cost: GridCost) -> str:
    """A yaml header's figures: :meth:`GridCost.finished_text`, then the hours per machine."""
    machines = cost.machines_text()
    return cost.finished_text() + (f": {machines}" if machines else " committed so far")


def grid_cost(path: Path, results=None) -> GridCost:
    """A profile yaml's :class:`GridCost` from the records and divergences under ``results``."""
    from ..sweep import load_grid

    chapter = chapter_of(path)
    profile = path.parent.parent.name if path.parent.name == REDESIGN else path.parent.name
    _, configs = load_grid(chapter, path, robustness=profile == "robustness")
    runs = stored_runs(configs, results)
    records = list(grid_records(runs, profile).values())
    return GridCost(records, grid_divergences(runs, profile), len(configs) - len(filed_elsewhere(runs, profile)))


def grid_divergences(runs: list[StoredRun], profile: str) -> list:
    """The stored divergences of ``runs`` (:func:`stored_runs`) filed under ``results/<profile>/``, of
    runs with no record anywhere (a record, from a rerun elsewhere, takes the divergence's place)."""
    from ..results import read_divergence

    filed = (next((path for path in run.diverged if path.parent.parent.name == profile), None)
             for run in runs if not run.records)
    return [read_divergence(path) for path in filed if path is not None]


def cost_header(path: Path, results=None) -> list[str]:
    """The three comment lines that state a profile yaml's measured cost from its committed records
    (and its diverged runs)."""
    return [f"{COST_MARK} (summed from the committed records' timings, each run's wall time: one thread per run",
            "# including whatever shared the cores on a CPU; on a GPU, the runs that shared the device):",
            f"{COST_CONTINUED}{grid_cost_text(grid_cost(path, results))}."]


def filed_elsewhere(runs: list[StoredRun], profile: str) -> list:
    """The configs of ``runs`` (:func:`stored_runs`) whose records (or divergences) are committed
    under another profile and not under ``profile``: runs a grid shares with another (FedGMKD's
    50-round robustness grid reads its base reading's runs from the 50-round rerun, filed under
    ``reduced/``), so that profile's cost, not this one's."""
    return [run.config for run in runs if run.folders() and profile not in run.folders()]


def with_cost_header(text: str, header: list[str]) -> str:
    """``text`` (a yaml) with its measured-cost lines (the mark and the lines after it that start
    "# including", then the figures' line, :data:`COST_FIGURES`) replaced by ``header``, or ``header`` at the end of its leading comments."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(COST_MARK)), None)
    if start is None:
        start = end = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    else:
        end = start + 1
        while end < len(lines) and lines[end].startswith("# including"):
            end += 1
        if end < len(lines) and re.match(COST_FIGURES, lines[end]):  # the figures' line, once
            end += 1
    lines[start:end] = header
    return "\n".join(lines) + "\n"
