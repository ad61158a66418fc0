"""The papers' tables kept as data (``fedkd_core/chapters/<chapter>/paper_*.csv``) hold the papers'
numbers: a few cells by value, always; every cell against the papers' text where it is beside the
checkout (``../shared/papers``, and ``../shared/specs`` for FedGMKD's appendix tables)."""

import io
import re
from pathlib import Path

import pandas as pd
import pytest

from fedkd_core.chapters import fedckd, fedgmkd, fedua, knfu

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PAIR = re.compile(r"(\d+\.\d+)\s*±(?:plus-or-minus\\pm±)?\s*(\d+\.\d+)")  # "62.6 ± 0.23", "90.15±plus-or-minus\pm±0.10"


def shared_text(path: str) -> str:
    source = SHARED / path
    if not source.exists():
        pytest.skip(f"{source} is not beside the checkout")
    return source.read_text()


def block(text: str, start: str, end: str | None = None) -> str:
    """The text from ``start`` to ``end`` (or to the end)."""
    after = text[text.index(start):]
    return after[:after.index(end)] if end else after


def cell(frame: pd.DataFrame, **keys) -> pd.Series:
    """The one row of ``frame`` with these key values."""
    rows = frame[(frame[list(keys)] == pd.Series(keys)).all(axis=1)]
    assert len(rows) == 1, keys
    return rows.iloc[0]


# --- a few cells by value, typed from the papers -------------------------------------------------

def test_fedckd_tables_hold_the_papers_numbers():
    assert tuple(cell(fedckd.paper_accuracy_table("practical"), dataset="cifar10", clients=100,
                      algorithm="fedckd")[["mean", "std"]]) == (81.41, 0.35)
    assert tuple(cell(fedckd.paper_accuracy_table("pathological"), dataset="cifar100", clients=100,
                      algorithm="fedprox")[["mean", "std"]]) == (13.32, 0.37)
    assert tuple(cell(fedckd.paper_table3(), dataset="cifar10", algorithm="fedckd")[["mean", "client_std"]]) == (81.02, 8.84)
    assert tuple(cell(fedckd.paper_table4(), annealing=False)[["mean", "std"]]) == (57.08, 0.15)
    table5 = fedckd.paper_table5()
    assert tuple(cell(table5, algorithm="lg_fedavg", varied="model", value="mobilenet_v2")[["mean", "std"]]) == (18.26, 1.33)
    assert tuple(cell(table5, algorithm="fedckd", varied="alpha", value=1.0)[["mean", "std"]]) == (40.64, 0.36)


def test_fedgmkd_tables_hold_the_papers_numbers():
    assert cell(fedgmkd.paper_table1(), method="fedgmkd", clients=50, metric="global")["mean"] == 60.31
    assert cell(fedgmkd.paper_table1("SVHN"), method="fedprox", clients=20, metric="local")["mean"] == 86.38
    assert cell(fedgmkd.paper_times(), dataset="CIFAR-100", method="fpl")["seconds"] == 373.09
    assert cell(fedgmkd.paper_table3(), method="only_dat", alpha=5.0, metric="global")["mean"] == 52.33
    assert cell(fedgmkd.paper_table5(), lam=0.10, gamma=0.06, metric="global")["mean"] == 47.52
    assert cell(fedgmkd.paper_table6(), method="hk_dat", clients=20, metric="local")["mean"] == 62.31


def test_fedua_tables_hold_the_papers_numbers():
    assert tuple(cell(fedua.paper_table1(), selection="bald", ratio=0.6)[["mean", "std"]]) == (73.9, 0.46)
    assert tuple(cell(fedua.paper_table2(), partition="dir0.1", algorithm="fedua")[["mean", "std"]]) == (65.3, 0.78)
    assert tuple(cell(fedua.paper_table3(), participation=0.4, algorithm="feddf")[["mean", "std"]]) == (63.8, 1.03)
    assert cell(fedua.paper_changes(), row="accuracy drop", algorithm="fedua", column="C = 0.4")["printed"] == 8.7


def test_knfu_tables_hold_the_papers_numbers():
    assert tuple(cell(knfu.paper_table1(), alpha=0.25, size=100, algorithm="knfu_local")[["mean", "std"]]) == (88.7, 0.2)
    assert tuple(cell(knfu.paper_table1(), alpha=0.5, size=200, algorithm="knfu_local")[["mean", "std"]]) == (89.9, 0.0)
    assert tuple(cell(knfu.paper_table2(), alpha=0.1, size=1000, algorithm="fedmd")[["mean", "std"]]) == (52.34, 1.18)
    assert tuple(cell(knfu.paper_table2(), alpha=1.0, size=500, algorithm="selective_fd")[["mean", "std"]]) == (44.38, 2.63)


# --- every cell against the papers' text ----------------------------------------------------------

FEDCKD_DATASETS = {"FMNIST": "fashion_mnist", "CIFAR10": "cifar10", "CIFAR100": "cifar100"}
FEDCKD_METHODS = {label: key for key, label in fedckd.METHOD_NAMES.items()}


def fedckd_rows(text: str, start: str, end: str) -> list[tuple[str, list[tuple[float, float]]]]:
    """(first word, its mean ± std pairs) of each line of a table that holds pairs."""
    return [(line.split()[0], [(float(m), float(s)) for m, s in PAIR.findall(line)])
            for line in block(text, start, end).splitlines() if PAIR.search(line)]


def test_every_fedckd_cell_is_the_papers():
    text = shared_text("papers/fedckd.md")
    methods = [FEDCKD_METHODS[label] for label in block(text, "TABLE I:").splitlines()[1].split()[2:]]
    scales = [(dataset, n) for dataset in FEDCKD_DATASETS.values() for n in (20, 100)]
    for setting, (start, end) in {"practical": ("TABLE I:", "TABLE II:"),
                                  "pathological": ("TABLE II:", "Individual personalization")}.items():
        ours = fedckd.paper_accuracy_table(setting).set_index(["dataset", "clients", "algorithm"])
        rows = fedckd_rows(text, start, end)
        paper = {(*scale, method): pair for scale, (_, pairs) in zip(scales, rows) for method, pair in zip(methods, pairs)}
        assert {key: tuple(row) for key, row in ours[["mean", "std"]].iterrows()} == paper, setting
    table3 = fedckd.paper_table3().set_index(["algorithm", "dataset"])[["mean", "client_std"]]
    paper3 = {(FEDCKD_METHODS[label], dataset): pair for label, pairs in fedckd_rows(text, "TABLE III:", "IV-C")
              for dataset, pair in zip(FEDCKD_DATASETS.values(), pairs)}
    assert {key: tuple(row) for key, row in table3.iterrows()} == paper3
    (_, (without, with_)), = fedckd_rows(text, "TABLE IV:", "TABLE V:")
    assert {row.annealing: (row.mean, row.std) for row in fedckd.paper_table4().itertuples()} == {False: without, True: with_}
    columns = [("alpha", 0.01), ("alpha", 0.1), ("alpha", 1.0), ("participation", 0.2), ("participation", 0.6),
               ("participation", 1.0), ("model", "resnet8"), ("model", "mobilenet_v2")]
    paper5 = {(FEDCKD_METHODS[label], *column): pair for label, pairs in fedckd_rows(text, "TABLE V:", "IV-D")
              for column, pair in zip(columns, pairs)}
    table5 = fedckd.paper_table5()
    assert {(r.algorithm, r.varied, r.value): (r.mean, r.std) for r in table5.itertuples()} == paper5


FEDGMKD_METHODS = {"FedAvg": "fedavg", "FedProx": "fedprox", "Moon": "moon", "FedGen": "fedgen", "FedMD": "fedmd",
                   "FedProto": "fedproto", "FPL": "fpl", "FjORD": "fjord", "FedGMKD": "fedgmkd"}


def test_every_fedgmkd_table1_cell_is_the_papers():
    """The paper's Table 1 as its text holds it: some rows shifted by a cell in extraction, so each
    row is read as its dataset (where named), its scheme, then six accuracies and a time."""
    text = shared_text("papers/fedgmkd.md")
    datasets = {"SVHN": "SVHN", "CIFAR10": "CIFAR-10", "CIFAR100": "CIFAR-100"}
    paper, times, dataset = {}, {}, None
    for line in block(text, "| Dataset", "# Impact").splitlines():
        cells = [re.sub(r"</?b>", "", c).strip() for c in line.strip("|").split("|")]
        dataset = next((datasets[c] for c in cells if c in datasets), dataset)
        method = next((FEDGMKD_METHODS[c] for c in cells if c in FEDGMKD_METHODS), None)
        numbers = [float(c) for c in cells if re.fullmatch(r"\d+\.\d+", c)]
        if method is None:
            continue
        for i, clients in enumerate((10, 20, 50)):
            paper[(dataset, method, clients, "local")] = numbers[i]
            paper[(dataset, method, clients, "global")] = numbers[3 + i]
        times[(dataset, method)] = numbers[6]
    ours = {(d, r.method, r.clients, r.metric): r.mean for d in datasets.values()
            for r in fedgmkd.paper_table1(d).itertuples()}
    assert ours == paper and len(paper) == 3 * 9 * 6
    assert {(r.dataset, r.method): r.seconds for r in fedgmkd.paper_times().itertuples()} == times


def spec_csv(text: str, title: str) -> pd.DataFrame:
    """The ```csv block that follows ``title`` in a spec."""
    after = block(text, title)
    return pd.read_csv(io.StringIO(after[after.index("```csv") + 6:after.index("```", after.index("```csv") + 6)]))


def test_every_fedgmkd_appendix_cell_is_the_specs():
    text = shared_text("specs/fedgmkd.md")
    table3 = spec_csv(text, "Table 2 (heterogeneity)").query("table == 3")
    rows = {"FedAvg": "fedavg", "FedGMKD (only CKF)": "only_ckf", "FedGMKD (only DAT)": "only_dat", "FedGMKD": "fedgmkd"}
    paper3 = {(rows[r.scheme], alpha, metric): r[f"c10_{metric}_b{label}"] for _, r in table3.iterrows()
              for alpha, label in ((0.2, "0.2"), (5.0, "5")) for metric in ("local", "global")}
    assert {(r.method, r.alpha, r.metric): r.mean for r in fedgmkd.paper_table3().itertuples()} == paper3
    table5 = spec_csv(text, "Table 5 (λ, γ").query("scheme == 'FedGMKD'")
    paper5 = {(r["lambda"], r.gamma, metric): r[metric] for _, r in table5.iterrows() for metric in ("local", "global")}
    assert {(r.lam, r.gamma, r.metric): r.mean for r in fedgmkd.paper_table5().itertuples()} == paper5
    table6 = spec_csv(text, "Table 6 (hyper-knowledge").query("dataset == 'CIFAR-10'")
    paper6 = {(method, r.clients, metric): r[f"{method}_{metric}"] for _, r in table6.iterrows()
              for method in ("fedgmkd", "hk_dat") for metric in ("local", "global")}
    assert {(r.method, r.clients, r.metric): r.mean for r in fedgmkd.paper_table6().itertuples()} == paper6


def fedua_cells(text: str, start: str, end: str | None, derived: int) -> list[tuple[tuple[float, float], list]]:
    """Each mean ± spread of a FedUA table in reading order, with the ``derived`` printed
    percentages on the lines after it, as printed ("-11", "8.0"; None where the paper prints "1",
    the reference)."""
    lines = [line.strip() for line in block(text, start, end).splitlines() if line.strip()]
    cells = []
    for i, line in enumerate(lines):
        if match := PAIR.fullmatch(line):
            after = [None if value == "1" else value.replace("−", "-").replace("%", "").replace(" ", "")
                     for value in lines[i + 1:i + 1 + derived]]
            cells.append(((float(match[1]), float(match[2])), after))
    return cells


def printed_value(text: str) -> tuple[float, int]:
    """A printed percentage as (value, its decimal places): "-11" -> (-11.0, 0), "8.0" -> (8.0, 1)."""
    return float(text), len(text.partition(".")[2])


def test_every_fedua_cell_is_the_papers():
    text = shared_text("papers/fedua.md")
    table1 = fedua_cells(text, "Table 1. The performances", "Table 2. The performances", 0)
    assert [(r.mean, r.std) for r in fedua.paper_table1().itertuples()] == [pair for pair, _ in table1]
    assert list(fedua.paper_table1().selection) == ["random"] * 5 + ["bald"] * 5
    table2 = fedua_cells(text, "Table 2. The performances", "Table 3. The performances", 2)
    order2 = [(a, p) for a in ("fedavg", "feddf", "fedua") for p in ("step", "dir0.1", "dir0.5")]
    assert {(r.algorithm, r.partition): (r.mean, r.std) for r in fedua.paper_table2().itertuples()} == \
        dict(zip(order2, (pair for pair, _ in table2)))
    table3 = fedua_cells(text, "Table 3. The performances", None, 1)
    order3 = [(a, c) for a in ("fedavg", "feddf", "fedua") for c in (1.0, 0.7, 0.4)]
    assert {(r.algorithm, r.participation): (r.mean, r.std) for r in fedua.paper_table3().itertuples()} == \
        dict(zip(order3, (pair for pair, _ in table3)))
    printed = {**{("change vs step", a, p): after[0] for (a, p), (_, after) in zip(order2, table2) if after[0] is not None},
               **{("change vs FedAvg", a, p): after[1] for (a, p), (_, after) in zip(order2, table2) if after[1] is not None},
               **{("accuracy drop", a, f"C = {c:g}"): after[0] for (a, c), (_, after) in zip(order3, table3)
                  if after[0] is not None}}
    assert {(r.row, r.algorithm, r.column): (r.printed, r.decimals) for r in fedua.paper_changes().itertuples()} == \
        {key: printed_value(value) for key, value in printed.items()}


KNFU_METHODS = {label: key for key, label in knfu.METHODS.items()}
KNFU_PAIR = re.compile(r"\$(\d+\.\d+) \\pm (\d+\.\d+)\$")  # "$93.5 \pm 0.6$"


def knfu_cells(text: str, start: str, end: str) -> dict[tuple[float, int, str], tuple[float, float]]:
    """{(alpha, |D_n|, method): (mean, std)} of a KnFu table as its text holds it: a header row of
    |D_n| = ..., a row of method names under each, then one row per heterogeneity level."""
    lines = [line for line in block(text, start, end).splitlines() if line.startswith("|")]
    sizes = [int(n) for n in re.findall(r"=\s*(\d+)\$", lines[0])]
    methods = [KNFU_METHODS[c.strip()] for c in lines[2].strip("|").split("|") if c.strip()]
    columns = list(zip([size for size in sizes for _ in range(len(methods) // len(sizes))], methods))
    cells = {}
    for line in lines[3:]:
        alpha = float(re.search(r"\\alpha = ([\d.]+)", line)[1])
        pairs = [(float(m), float(sd)) for m, sd in KNFU_PAIR.findall(line)]
        assert len(pairs) == len(columns), line
        cells.update({(alpha, size, method): pair for (size, method), pair in zip(columns, pairs)})
    return cells


def test_every_knfu_cell_is_the_papers():
    text = shared_text("papers/knfu.md")
    for table, dataset, (start, end), count in ((knfu.paper_table1(), "mnist", ("TABLE 1:", "TABLE 2:"), 4 * 3 * 4),
                                                (knfu.paper_table2(), "cifar10", ("TABLE 2:", "### B."), 3 * 2 * 4)):
        paper = knfu_cells(text, start, end)
        assert set(table.dataset) == {dataset} and len(paper) == count
        assert {(r.alpha, r.size, r.algorithm): (r.mean, r.std) for r in table.itertuples()} == paper
