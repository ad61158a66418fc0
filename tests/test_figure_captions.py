"""Every figure a paper chapter draws carries a caption (issue 61: "every image's alt text is its
file path"). The book's Sphinx extension (fedkd_core.alt_text) makes a figure's caption its alt
text, so a figure drawn without ``plots.caption`` reaches the reader as "A figure of the section
...": a chapter cell that draws a figure must caption it. Read from the jupytext sources, no
execution; tests/test_book_reader_view.py checks the built pages' alt texts in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAPTERS = ("knfu", "fedckd", "fedua", "fedgmkd")
# what draws a figure in a chapter's cell
DRAWS = re.compile(r"plt\.subplots\(|plots\.grid\(|plt\.show\(\)|\.plot_\w+\(|plot_\w+\(")


def code_cells(chapter: str) -> list[str]:
    text = (NOTEBOOKS / f"{chapter}.py").read_text()
    cells = re.split(r"^# %%.*$", text, flags=re.M)
    markers = re.findall(r"^# %%.*$", text, flags=re.M)
    return [cell for marker, cell in zip(markers, cells[1:]) if "[markdown]" not in marker]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_a_chapter_draws_has_a_caption(chapter):
    uncaptioned = [cell.strip().splitlines()[0] for cell in code_cells(chapter)
                   if DRAWS.search(cell) and "plots.caption(" not in cell]
    assert not uncaptioned, f"{chapter}: cells that draw a figure without plots.caption: {uncaptioned}"


def test_a_divergence_trace_has_a_caption_that_names_its_run():
    from fedkd_core.chapters import fedckd

    traces = fedckd.divergence_traces()
    if not traces:
        pytest.skip("no committed divergence trace")
    for trace in traces:
        text = fedckd.trace_caption(trace)
        assert text.startswith("The rerun of ") and f"seed {trace['seed']}" in text and "log scale" in text
