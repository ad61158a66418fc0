"""fedkd_core.plots: the figures' captions."""

import matplotlib

matplotlib.use("Agg")

import IPython.display  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from fedkd_core import plots  # noqa: E402


@pytest.fixture
def shown(monkeypatch):
    """What plots.caption displays, in order."""
    displayed = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **kwargs: displayed.extend(objects))
    return displayed


def test_caption_shows_the_figure_once_then_the_escaped_caption_under_it(shown):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    plots.caption(fig, "ALMA <b>per</b> round & *mean* over **3** seeds, `run_grid`")
    assert len(shown) == 2 and shown[0] is fig
    assert isinstance(shown[1], IPython.display.HTML)
    assert shown[1].data == ('<p class="fedkd-caption">ALMA &lt;b&gt;per&lt;/b&gt; round &amp; <em>mean</em> over '
                             '<strong>3</strong> seeds, <code>run_grid</code></p>')
    assert fig.number not in plt.get_fignums()  # closed: the inline backend does not show it again


def test_caption_of_a_figure_a_helper_already_showed_adds_only_the_caption(shown):
    plots.caption(None, "a * b < c")
    assert [type(o) for o in shown] == [IPython.display.HTML]
    assert shown[0].data == '<p class="fedkd-caption">a * b &lt; c</p>'


def test_the_book_styles_the_caption():
    from pathlib import Path

    css = (Path(__file__).resolve().parents[1] / "book" / "_static" / "fedkd.css").read_text()
    assert "p.fedkd-caption" in css


def test_the_highlighted_method_is_drawn_thick_in_the_plot_not_only_in_the_legend():
    import pandas as pd

    history = pd.DataFrame([{"round": r, "seed": s, "algorithm": a, "alma": 0.5 + 0.01 * r + 0.1 * (a == "KnFu")}
                            for r in range(1, 6) for s in (0, 1) for a in ("KnFu", "FedMD")])
    fig, ax = plt.subplots()
    plots.learning_curves(history, ax, highlight="KnFu")
    legend = {t.get_text(): h for h, t in zip(ax.get_legend().legend_handles, ax.get_legend().get_texts())}
    widths = {name: {line.get_linewidth() for line in ax.get_lines()
                     if line.get_color() == handle.get_color() and line.get_label().startswith("_child")}
              for name, handle in legend.items()}
    assert widths["KnFu"] == {3.0} and 3.0 not in widths["FedMD"]
    plt.close(fig)


def test_seeds_text_gives_the_count_or_its_range_over_the_curves():
    import pandas as pd

    frame = pd.DataFrame({"method": ["a", "a", "a", "b", "b"], "seed": [0, 1, 2, 0, 0]})
    assert plots.seeds_text(frame, ["method"]) == "1 to 3"
    assert plots.seeds_text(frame[frame.method == "a"], ["method"]) == "3"


def test_learning_curves_of_a_short_run_tick_whole_rounds_only():
    import pandas as pd

    history = pd.DataFrame([{"round": r, "seed": 0, "algorithm": "FedAvg", "alma": 0.5} for r in (1, 2)])
    fig, ax = plt.subplots()
    plots.learning_curves(history, ax)
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    plt.close(fig)


def test_a_small_effect_in_the_cell_heatmap_keeps_its_digits_rather_than_reading_zero():
    import pandas as pd

    table = pd.DataFrame({"claim": ["anneal", "anneal", "anneal", "fuse"], "cell": ["a", "b", "c", "a"],
                          "effect": [0.047, -0.35, 2.44, 0.0], "outcome": ["holds", "inconclusive", "holds", "inconclusive"]})
    fig = plots.cell_verdicts(table)
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == ["· +0.0", "· -0.35", "✓ +0.05", "✓ +2.4"]
    assert [plots.effect_label(e) for e in (0.96, -0.94, 12.345)] == ["+1.0", "-0.94", "+12.3"]
    assert [plots.effect_label(e) for e in (0.0042, -0.033, 3.7e-15, -2e-9)] == ["+0.0042", "-0.03", "+0.0", "+0.0"]
    plt.close(fig)


def test_a_figure_takes_its_caption_as_alt_text_or_else_its_section():
    """fedkd_core.alt_text (a Sphinx extension of the book): the alt text describes the figure."""
    from docutils import nodes

    from fedkd_core.alt_text import describe_images

    section = nodes.section()
    first, second = nodes.image(uri="_images/a1b2.png"), nodes.image(uri="_images/c3d4.png")
    section += [nodes.title(text="Fig. 3: learning curves"), first,
                nodes.raw("", '<p class="fedkd-caption">ALMA (%) <b>per</b> round &amp; method.</p>', format="html"),
                second]
    assert describe_images(section) == 2
    assert first["alt"] == "ALMA (%) per round & method."
    assert second["alt"] == "A figure of the section “Fig. 3: learning curves”"


def test_a_grid_has_at_most_two_panels_a_row():
    import matplotlib

    matplotlib.use("Agg")
    fig, axes = plots.grid(5)
    assert len(axes) == 5 and fig.get_size_inches()[0] <= 7.0 + 1e-9  # ~330 px a panel in the book's column
