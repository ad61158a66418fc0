"""The book as a reader sees it: headless Chromium, no network. Skipped where Chromium is absent
(Debian: `apt-get install chromium`); `make test` runs it wherever it is installed."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

# No network at all: every request outside file:// fails, as for a reader offline.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=15000"]


def rendered_dom(page: Path, profile: Path) -> str:
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> Path:
    """A one-page book built with the project's own _config.yml (its math setup included)."""
    source = tmp_path_factory.mktemp("book")
    shutil.copy(ROOT / "book" / "_config.yml", source / "_config.yml")
    (source / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (source / "intro.md").write_text("# Math\n\nInline $\\mathbf{F}_n = f(x;\\Omega_n)$ and display\n\n"
                                      "$$\\mathcal{L} = \\mathrm{CE}(p, y) + \\lambda\\,\\mathrm{KL}(p \\| q)$$\n")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"  # the venv's, beside its python
    subprocess.run([str(jupyter_book), "build", str(source)], check=True, capture_output=True, timeout=600)
    return source / "_build" / "html"


def test_equations_render_offline_from_the_mathjax_shipped_with_the_book(small_book, tmp_path):
    assert (small_book / "_static" / "mathjax" / "tex-chtml.js").exists()
    dom = rendered_dom(small_book / "intro.html", tmp_path / "profile")
    assert dom.count("<mjx-container") >= 2, "MathJax did not typeset the page"
    assert "\\mathbf{F}_n" not in dom.split("<mjx-container", 1)[0], "raw TeX is shown to the reader"


@pytest.mark.parametrize("chapter", ["setting", "knfu", "fedckd"])
def test_built_chapters_typeset_their_math_and_hide_plumbing_code(chapter, tmp_path):
    page = ROOT / "book" / "_build" / "html" / "chapters" / f"{chapter}.html"
    if not page.exists():
        pytest.skip("the book is not built (make book)")
    dom = rendered_dom(page, tmp_path / "profile")
    assert "<mjx-container" in dom
    assert "notebook_params(" not in dom, "the imports cell is shown (it should be tagged remove-input)"
    assert "tag_hide-input" in dom, "no code cell is collapsed behind a toggle"
