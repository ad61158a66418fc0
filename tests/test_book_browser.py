"""The book as a reader sees it: built from the chapters' smoke outputs, opened in headless
Chromium with no network. Skipped where Chromium is absent (Debian: `apt-get install chromium`);
`make test` runs it wherever it is installed, and CI installs it when it can.

Every page must: typeset its math from the MathJax shipped with the book (no raw TeX left), show
no broken image, not overflow the content area horizontally, show no "nan" in its text, have no
table wider than the content column at 1280 px, and show every figure at 72% of its size or more
(the book's figures set 12 pt text at 100 dpi, fedkd_core.plots.BOOK_STYLE, so their text stays at
least 12 px on screen). A paper chapter shows its verdict within the first fifth of the page, and
the landing page and the Claims page give every claim the same verdict. The checks run in the page
itself: a small script appended to a copy of each page writes its findings into the DOM, which
Chromium's --dump-dom returns.
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
  const nan = (text.match(/\\bnan\\b/gi) || []).length;
  const paragraph = article.querySelector("section p") || article;  // the text column, inside the article's padding
  const column = paragraph.clientWidth;
  const wide = [...article.querySelectorAll("table")].map(t => [t.getBoundingClientRect().width,
      (t.querySelector("th") || t).innerText.slice(0, 40)])
    .filter(([w]) => w > column + 1).map(([w, head]) => `${Math.round(w)} px (${head})`);
  const small = [...article.querySelectorAll("img")].filter(i => i.naturalWidth > 0)
    .map(i => i.getBoundingClientRect().width / i.naturalWidth).filter(r => r < 0.72).map(r => r.toFixed(2));
  const verdict = document.getElementById("verdict");
  const height = document.documentElement.scrollHeight;
  const verdictAt = verdict ? (verdict.getBoundingClientRect().top + window.scrollY) / height : null;
  document.body.setAttribute("data-check", JSON.stringify({raw, broken, overflow, math, nan, column, wide, small,
                                                           verdictAt}));
}, 3000));
</script>
"""


PAPER_CHAPTERS = ("knfu", "fedckd", "fedua", "fedgmkd")


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
    for path in [ROOT / "book" / "_config.yml", ROOT / "book" / "_toc.yml", *(ROOT / "book").glob("*.md")]:
        shutil.copy(path, source / path.name)
    shutil.copytree(ROOT / "book" / "_static", source / "_static")
    (source / "chapters").mkdir()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        target = source / "chapters" / notebook.name
        execute_notebook(notebook, target, progress_bar=False, cwd=str(ROOT / "notebooks"))
        subprocess.run([sys.executable, str(ROOT / "tools" / "hide_parameter_cells.py"), str(target)], check=True)
    subprocess.run([sys.executable, "-m", "fedkd_core.glance", str(source / "_generated" / "glance.md")],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "fedkd_core.performance", str(source / "_generated" / "performance.md")],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "fedkd_core.costs", str(source / "_generated" / "costs.md")],
                   check=True, capture_output=True)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    build = subprocess.run([str(jupyter_book), "build", str(source)], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (source / "build.log").write_text(build.stdout + build.stderr)
    return source / "_build" / "html"


def pages(html: Path) -> list[Path]:
    return [html / "intro.html", html / "performance.html", html / "cluster.html",
            *sorted((html / "chapters").glob("*.html"))]


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
        if found["nan"]:
            problems.append(f"{page.name}: 'nan' {found['nan']} times in the rendered text")
        if found["wide"]:
            problems.append(f"{page.name}: tables wider than the {found['column']} px column: {found['wide']} px")
        if found["small"]:
            problems.append(f"{page.name}: figures shown at {found['small']} of their size (text below 12 px)")
        if page.stem in PAPER_CHAPTERS and (found["verdictAt"] is None or found["verdictAt"] > 0.2):
            problems.append(f"{page.name}: the verdict starts at {found['verdictAt']} of the page, not in its first fifth")
    assert not problems, "\n".join(problems)


def claim_verdicts(page: Path, claim_column: str, verdict_column: str, every: bool = False) -> dict[str, str]:
    """{claim: verdict} from the first table of ``page`` whose header has both columns (with
    ``every``, from all of them: the landing page has one table per paper)."""
    from bs4 import BeautifulSoup

    if every:
        found: dict[str, str] = {}
        for table in BeautifulSoup(page.read_text(), "html.parser").find_all("table"):
            found |= claim_verdicts_of(table, claim_column, verdict_column)
        return found
    for table in BeautifulSoup(page.read_text(), "html.parser").find_all("table"):
        verdicts = claim_verdicts_of(table, claim_column, verdict_column)
        if verdicts:
            return verdicts
    return {}


def claim_verdicts_of(table, claim_column: str, verdict_column: str) -> dict[str, str]:
    """{claim: verdict} of one table, or {} where its header lacks either column."""
    if table.find("tr") is None:
        return {}
    header = [th.get_text(" ", strip=True) for th in table.find("tr").find_all("th")]
    if claim_column not in header or verdict_column not in header:
        return {}
    claim_at, verdict_at = header.index(claim_column), header.index(verdict_column)
    rows = [tr.find_all("td") for tr in table.find_all("tr")[1:]]

    def text(cell) -> str:  # Sphinx's smart quotes turn a markdown "'" into "’"
        return cell.get_text(" ", strip=True).replace("’", "'").replace("‘", "'")

    # a claim cell may carry small print under the claim: its link text is the claim
    return {text(cells[claim_at].find("a") or cells[claim_at]): text(cells[verdict_at]) for cells in rows if cells}


def test_the_landing_page_and_the_claims_page_agree_claim_by_claim(smoke_book):
    landing = claim_verdicts(smoke_book / "intro.html", "claim", "our verdict", every=True)
    claims = claim_verdicts(smoke_book / "chapters" / "claims.html", "claim", "verdict")
    assert landing and landing == claims


def test_chapters_hide_plumbing_and_show_parameters_as_a_table(smoke_book):
    for page in sorted((smoke_book / "chapters").glob("*.html")):
        if page.name.endswith(".probe.html"):
            continue
        html = page.read_text()
        assert "notebook_params(" not in html, f"{page.name}: the imports cell is shown"
        assert "tag_hide-input" in html, f"{page.name}: no code cell is collapsed behind a toggle"
        # a parameters table headed by the profile, or, on a page with no parameter but the profile
        # (the Claims page reads committed records only), a sentence naming it
        assert "profile: smoke" in html or "built with the smoke profile" in html, f"{page.name}: no parameters table"


def test_readers_see_plain_machine_names_and_no_internal_wording(smoke_book):
    """CPU family/model strings stay in the records and on the Performance page (timings, where
    they matter); every other page names a machine plainly ("AMD EPYC Zen 4, 2 cores")."""
    from bs4 import BeautifulSoup

    from fedkd_core import performance
    from fedkd_core.cpuinfo import machine_text

    texts = {}
    for page in pages(smoke_book):
        article = BeautifulSoup(page.read_text(), "html.parser").find("article")
        texts[page.stem] = " ".join(article.get_text(" ").split())
    for name, text in texts.items():
        if name != "performance":
            assert not re.search(r"family \d+ model \d+", text), f"{name}: a raw CPU description"
        for internal in ("stands for one of them", "NBVAL_CHECK_OUTPUT", "read this in the built book"):
            assert internal not in text, f"{name}: internal wording {internal!r}"
    for result in performance.load_results():
        assert machine_text(result["machine"]["cpu"], result["machine"]["cores"]) in texts["performance"]
        assert result["date"] in texts["performance"]


def test_the_build_resolves_every_link_of_the_narrative(smoke_book):
    """A "[text](#heading)" link in a Markdown cell that MyST cannot resolve still renders, as a
    plain fragment, so only the build's warning tells that the heading is missing or renamed."""
    log = (smoke_book.parents[1] / "build.log").read_text()
    unresolved = [line for line in log.splitlines() if "xref_missing" in line or "undefined label" in line]
    assert not unresolved, "\n".join(unresolved)


def test_every_link_between_pages_reaches_a_page_and_an_anchor_that_exist(smoke_book):
    """Links written in a chapter's *output* (a verdict box, the ledger) are not rewritten by the
    book's build the way Markdown cells' links are: ``claims.ipynb#x`` stays a dead link there."""
    from urllib.parse import unquote, urlsplit

    from bs4 import BeautifulSoup

    soups = {page.resolve(): BeautifulSoup(page.read_text(), "html.parser")
             for page in pages(smoke_book) if not page.name.endswith(".probe.html")}
    dead = []
    for page, soup in soups.items():
        for link in soup.find_all("a", href=True):
            target = urlsplit(link["href"])
            if target.scheme or target.netloc or not (target.path or target.fragment):
                continue
            path = (page.parent / unquote(target.path)).resolve() if target.path else page
            if not path.is_relative_to(smoke_book.resolve()):
                continue
            if path not in soups and not path.exists():
                dead.append(f"{page.name}: {link['href']} (no such file)")
            elif target.fragment and path in soups and not soups[path].find(id=target.fragment):
                dead.append(f"{page.name}: {link['href']} (no such anchor)")
    assert not dead, "\n".join(dead)
