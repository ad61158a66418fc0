"""The book as a reader sees it: built from the chapters' smoke outputs, opened in headless
Chromium with no network. Skipped where Chromium is absent (Debian: `apt-get install chromium`);
`make test` runs it wherever it is installed, and CI installs it when it can.

Every page must: typeset its math from the MathJax shipped with the book (no raw TeX left), show
no broken image, and not overflow the content area horizontally (wide tables scroll inside it).
The checks run in the page itself: a small script appended to a copy of each page writes its
findings into the DOM, which Chromium's --dump-dom returns.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.ipc_kernels import execute_notebook

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

# No network: every request outside file:// goes to a dead local port, as for a reader offline.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=20000",
         "--window-size=1280,900"]

CHECK_SCRIPT = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const article = document.querySelector("article") || document.body;
  const text = article.innerText;
  const raw = (text.match(/\\\\\\(|\\\\\\)|\\\\\\[|\\\\\\]|\\$\\$/g) || []).length;
  const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
  const overflow = article.scrollWidth - article.clientWidth;
  const math = document.querySelectorAll("mjx-container").length;
  document.body.setAttribute("data-check", JSON.stringify({raw, broken, overflow, math}));
}, 3000));
</script>
"""


def check_page(page: Path, profile: Path) -> dict:
    probe = page.with_name(page.stem + ".probe.html")
    probe.write_text(page.read_text().replace("</body>", CHECK_SCRIPT + "</body>"))
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", probe.as_uri()],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', result.stdout)
    assert found, f"the page check did not run on {page.name}"
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def smoke_book(tmp_path_factory) -> Path:
    """The book, built from every chapter executed with its smoke defaults."""
    source = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml", "intro.md"):
        shutil.copy(ROOT / "book" / name, source / name)
    (source / "chapters").mkdir()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        target = source / "chapters" / notebook.name
        execute_notebook(notebook, target, progress_bar=False, cwd=str(ROOT / "notebooks"))
        subprocess.run([sys.executable, str(ROOT / "tools" / "hide_parameter_cells.py"), str(target)], check=True)
    subprocess.run([sys.executable, "-m", "fedkd_core.glance", str(source / "_generated" / "glance.md")],
                   check=True, capture_output=True)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    build = subprocess.run([str(jupyter_book), "build", str(source)], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return source / "_build" / "html"


def pages(html: Path) -> list[Path]:
    return [html / "intro.html", *sorted((html / "chapters").glob("*.html"))]


def test_the_book_ships_mathjax(smoke_book):
    assert (smoke_book / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert "_static/mathjax/tex-chtml.js" in (smoke_book / "intro.html").read_text()


def test_every_page_typesets_its_math_offline_shows_its_images_and_fits_the_page(smoke_book, tmp_path):
    problems = []
    for page in pages(smoke_book):
        found = check_page(page, tmp_path / "profile")
        if found["raw"]:
            problems.append(f"{page.name}: {found['raw']} raw TeX delimiters in the rendered text")
        if found["broken"]:
            problems.append(f"{page.name}: broken images {found['broken']}")
        if found["overflow"] > 1:
            problems.append(f"{page.name}: content overflows horizontally by {found['overflow']} px")
        if page.parent.name == "chapters" and found["math"] == 0:
            problems.append(f"{page.name}: no typeset math")
    assert not problems, "\n".join(problems)


def test_chapters_hide_plumbing_and_show_parameters_as_a_table(smoke_book):
    for page in sorted((smoke_book / "chapters").glob("*.html")):
        if page.name.endswith(".probe.html"):
            continue
        html = page.read_text()
        assert "notebook_params(" not in html, f"{page.name}: the imports cell is shown"
        assert "tag_hide-input" in html, f"{page.name}: no code cell is collapsed behind a toggle"
        assert "profile: smoke" in html, f"{page.name}: no parameters table"
