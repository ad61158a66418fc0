"""The book as a reader sees it: built from the chapters' smoke outputs, opened in headless
Chromium with no network. Skipped where Chromium is absent (Debian: `apt-get install chromium`);
`make test` runs it wherever it is installed, and CI installs it when it can.

The book is built ONCE per session (the :func:`smoke_book` fixture): every chapter executed with
its smoke defaults, reading the committed records (a throw-away results folder that links them:
the verdicts and KnFu's tuning finding are the real ones, and the smoke runs the pages make go to
the throw-away folder), as ``make book`` reads them. A chapter is executed once per session: the
chapters nbval ran (in this environment, on this worker: tools/smoke_book.py) are taken as nbval
left them, and only the others are executed here. Two sets of checks read the book; they were two
files that each built a book of their own, and are one file so that both run on the worker that
built it.
``FEDKD_BOOK_HTML=book/_build/html`` checks an already built book instead (``make book``'s).

Every page must: typeset its math from the MathJax shipped with the book (no raw TeX left), show
no broken image, not overflow the content area horizontally, show no "nan" in its text (prose saying that a stored
run's loss "became nan" aside, as the reader's check below allows), have no
table wider than the content column at 1280 px, and show every figure at 72% of its size or more
(the book's figures set 12 pt text at 100 dpi, fedkd_core.plots.BOOK_STYLE, so their text stays at
least 12 px on screen). A paper chapter shows its verdict within the first fifth of the page, and
the landing page and the Claims page give every claim the same verdict. The checks run in the page
itself: a small script appended to a copy of each page writes its findings into the DOM, which
Chromium's --dump-dom returns.

What a reader sees at 1280 x 800 (issue 61; the second half of this file):

- the landing page, the Claims page and every paper chapter show a verdict word (holds, does not
  hold, mixed, inconclusive, ...) inside the first screen, and a chapter shows every claim of its
  verdict box there;
- nothing is wider than the text column unless it sits in a box that scrolls (an equation, a wide
  table): no cut equation, table or printed line;
- every figure is shown at 72% of its size or more (its 11 pt tick labels stay 10 px or more) and
  carries an alt text that describes it, not its file name;
- the visible text has no "nan", no "None" and no effect printed to four decimals; a verdict row no "-0.0".
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tools import hide_parameter_cells
from tools import smoke_book as book_folder

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

CHECK_SCRIPT = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const article = document.querySelector("article") || document.body;
  const text = article.innerText;
  const raw = (text.match(/\\\\\\(|\\\\\\)|\\\\\\[|\\\\\\]|\\$\\$/g) || []).length;
  const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
  const overflow = article.scrollWidth - article.clientWidth;
  const math = document.querySelectorAll("mjx-container").length;
  // prose may say a run's loss became NaN (a stored divergence, from the committed records), as the
  // reader's check below lets it; a "nan" anywhere else is a value that failed to compute
  const nan = (text.match(/(?<!became )(?<!is )\\bnan\\b/gi) || []).length;
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


def probe_page(page: Path, profile: Path) -> dict[str, dict]:
    """``page`` with both probes (:data:`CHECK_SCRIPT` and the reader's :data:`PROBE`) before its
    </body>, opened once in Chromium at 1280 x 800 with no network: {"check": ..., "reader": ...},
    what each probe left in the body's data attribute. (One load per page for both: Chromium's
    start is most of a page's seconds, and neither probe depends on the window's height.)"""
    import html

    probe = page.with_name(page.stem + ".probe.html")
    probe.write_text(page.read_text().replace("</body>", CHECK_SCRIPT + PROBE + "</body>"))
    result = subprocess.run([CHROMIUM, *READER_FLAGS, f"--user-data-dir={profile}", "--dump-dom", probe.as_uri()],
                            capture_output=True, text=True, timeout=180)
    probe.unlink()
    assert result.returncode == 0, result.stderr[-2000:]
    found = {}
    for name in ("check", "reader"):
        value = re.search(rf'data-{name}="([^"]*)"', result.stdout)
        assert value, f"the {name} probe did not run on {page.name}"
        found[name] = json.loads(html.unescape(value.group(1)))
    return found


@pytest.fixture(scope="module")
def page_probes(smoke_book) -> dict[str, dict]:
    """{page name: {"check": ..., "reader": ...}} for every page of the book (:func:`probe_page`)."""
    profile = Path(tempfile.mkdtemp(prefix="chromium-probes-"))
    return {page.stem: probe_page(page, profile) for page in pages(smoke_book)}


# The chapters that show verdicts read the ledger (make book's LEDGER_CHAPTERS): they start once it
# is cached; the others run beside its computation, as in ``make book``.
LEDGER_CHAPTERS = ("knfu", "fedckd", "fedua", "fedgmkd", "claims")


def run_step(command: list[str], what: str, cwd: Path = ROOT) -> None:
    """One step of the build in a child process (which inherits the environment); a failure names
    the step and ends with its output."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{what} failed:\n" + done.stdout[-3000:] + done.stderr[-3000:]


def build_book(folder: Path) -> Path:
    """The book from every chapter executed with its smoke defaults over the committed records, in
    the session's smoke-book ``folder`` (tools/smoke_book.py); returns its HTML folder. A chapter
    nbval already executed in this session is taken as nbval left it; the others are executed here
    with papermill, as ``make book`` does: the ledger computed once into the cache the chapters
    read, two processes at a time (the ledger beside the chapters without verdicts, then the
    chapters two by two)."""
    from concurrent.futures import ThreadPoolExecutor

    with book_folder.within(folder):  # the kernels inherit the environment
        source = folder / "book"
        source.mkdir()
        for path in [ROOT / "book" / "_config.yml", ROOT / "book" / "_toc.yml", *(ROOT / "book").glob("*.md")]:
            shutil.copy(path, source / path.name)
        shutil.copytree(ROOT / "book" / "_static", source / "_static")
        (source / "chapters").mkdir()
        no_parameters = folder / "smoke_defaults.yaml"  # papermill injects nothing: each chapter's own defaults
        no_parameters.write_text("{}\n")
        executed = book_folder.executed_dir(folder)

        def chapter(notebook: Path, ledger=None) -> None:
            out = source / "chapters" / notebook.name
            if (executed / notebook.name).exists():
                shutil.copy(executed / notebook.name, out)
            else:
                if ledger is not None:
                    ledger.result()  # re-raises the ledger's failure
                run_step([sys.executable, str(ROOT / "tools" / "ipc_kernels.py"), str(notebook), str(out),
                          str(no_parameters)], f"chapter {notebook.stem}", cwd=ROOT / "notebooks")
            hide_parameter_cells.hide(str(out))  # as make book's tools/hide_parameter_cells.py, in this process

        notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
        to_run = [nb for nb in notebooks if not (executed / nb.name).exists()]
        with ThreadPoolExecutor(max_workers=2) as pool:  # FIFO: the ledger starts before any chapter waits on it
            ledger = (pool.submit(run_step, [sys.executable, "-m", "fedkd_core.chapters.ledger_cache"], "the ledger")
                      if any(nb.stem in LEDGER_CHAPTERS for nb in to_run) else None)
            steps = [pool.submit(chapter, nb) for nb in notebooks if nb.stem not in LEDGER_CHAPTERS]
            steps += [pool.submit(chapter, nb, ledger) for nb in notebooks if nb.stem in LEDGER_CHAPTERS]
            for step in [ledger, *steps]:
                if step is not None:
                    step.result()
        print(f"smoke book: {len(notebooks) - len(to_run)} chapters as nbval executed them, "
              f"{len(to_run)} executed here ({', '.join(nb.stem for nb in to_run) or 'none'})")
        run_step([sys.executable, str(ROOT / "tools" / "generated_pages.py"), str(source / "_generated")],
                 "the generated pages (tools/generated_pages.py)")
        build = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(source)],
                               capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        (source / "build.log").write_text(build.stdout + build.stderr)
    return source / "_build" / "html"


@pytest.fixture(scope="module")
def smoke_book(request) -> Path:
    """The book's HTML folder: built here once (:func:`build_book`) in the session's smoke-book
    folder, or the one FEDKD_BOOK_HTML names."""
    given = os.environ.get("FEDKD_BOOK_HTML")
    return Path(given).resolve() if given else build_book(book_folder.session_folder(request.config))


def pages(html: Path) -> list[Path]:
    return [html / "intro.html", html / "performance.html", html / "cluster.html",
            *sorted(p for p in (html / "chapters").glob("*.html") if "." not in p.stem)]


def test_the_book_ships_mathjax(smoke_book):
    assert (smoke_book / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert "_static/mathjax/tex-chtml.js" in (smoke_book / "intro.html").read_text()


def test_every_page_typesets_its_math_offline_shows_its_images_and_fits_the_page(smoke_book, page_probes):
    problems = []
    for page in pages(smoke_book):
        found = page_probes[page.stem]["check"]
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
    log_file = smoke_book.parents[1] / "build.log"
    if os.environ.get("FEDKD_BOOK_HTML") and not log_file.exists():
        pytest.skip("a given book (FEDKD_BOOK_HTML) without the build.log this file's build writes")
    log = log_file.read_text()
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


# What a reader sees of the book at 1280 x 800 (issue 61), measured in headless Chromium.

WIDTH, HEIGHT = 1280, 800
READER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=20000",
                "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"]

# The page measures itself: a script appended to a copy of the page writes what it found into the
# DOM, which Chromium's --dump-dom returns.
PROBE = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const WORD = /^(holds|does not hold|mixed|inconclusive|inconclusive after correction|untested at this scale|not judged: unequal tuning|not testable offline|no committed records)( on (these \\d+ cells|this cell))?$/;
  const article = document.querySelector("article") || document.body;
  const paragraph = article.querySelector("section p") || article;
  const column = paragraph.getBoundingClientRect();
  const top = el => el.getBoundingClientRect().top + window.scrollY;
  const bottom = el => el.getBoundingClientRect().bottom + window.scrollY;
  const visible = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const words = [...article.querySelectorAll("b, strong")].filter(e => visible(e) && WORD.test(e.innerText.trim()));
  const box = document.querySelector("table.verdict-box");
  const boxWords = box ? words.filter(w => box.contains(w)) : [];
  const scrolls = el => { for (let a = el.parentElement; a && a !== article.parentElement; a = a.parentElement) {
      const style = getComputedStyle(a);
      if (["auto", "scroll"].includes(style.overflowX) && a.getBoundingClientRect().right <= column.right + 1) return true;
      if (style.overflowX === "hidden" && a.scrollWidth > a.clientWidth + 1) return false;  // cut, not scrolled
    } return false; };
  const wide = [];
  for (const el of article.querySelectorAll('table, pre, img, svg, mjx-container[display="true"], p, li, h1, h2, h3, div.cell_output > div')) {
    if (!visible(el)) continue;
    const r = el.getBoundingClientRect();
    const overflow = getComputedStyle(el).overflowX;
    const cut = el.scrollWidth > el.clientWidth + 1 && ["hidden", "clip"].includes(overflow);
    // content that runs past the element's own box (an equation wider than its container) counts
    const right = ["auto", "scroll"].includes(overflow) ? r.right : Math.max(r.right, r.left + el.scrollWidth);
    if ((right > column.right + 1 && !scrolls(el)) || cut)
      wide.push(`${el.tagName.toLowerCase()} ${Math.round(r.width)} px wide, right edge ${Math.round(r.right)} ` +
                `(column ${Math.round(column.left)}-${Math.round(column.right)})${cut ? ", cut" : ""}: ` +
                (el.tagName === "MJX-CONTAINER" ? "a display equation" : (el.innerText || el.getAttribute("alt") || "")
                 .replace(/\s+/g, " ").trim().slice(0, 50)));
  }
  const images = [...article.querySelectorAll("img")].filter(i => i.naturalWidth > 0).map(i => ({
      src: i.getAttribute("src").split("/").pop(), alt: i.getAttribute("alt") || "",
      shown: i.getBoundingClientRect().width, natural: i.naturalWidth}));
  document.body.setAttribute("data-reader", JSON.stringify({
    height: document.documentElement.scrollHeight, column: Math.round(column.width),
    firstWord: words.length ? {word: words[0].innerText.trim(), top: top(words[0]), bottom: bottom(words[0])} : null,
    boxWords: boxWords.map(w => bottom(w)), text: article.innerText, wide, images,
    verdictText: [...article.querySelectorAll("table.fedkd-verdicts, p.fedkd-headline")].map(t => t.innerText).join(" | ")}));
}, 3000));
</script>
"""


@pytest.fixture(scope="module")
def reader_pages(page_probes) -> dict[str, dict]:
    """{page name: what the reader's probe measured} for every page of the book."""
    return {name: found["reader"] for name, found in page_probes.items()}


FIRST_SCREEN = ("intro", "claims", *PAPER_CHAPTERS)


def test_a_verdict_word_is_on_the_first_screen(reader_pages):
    problems = []
    for name in FIRST_SCREEN:
        found = reader_pages[name]["firstWord"]
        if found is None:
            problems.append(f"{name}: no verdict word on the page")
        elif found["bottom"] > HEIGHT:
            problems.append(f"{name}: the first verdict word ({found['word']!r}) ends {found['bottom']:.0f} px down, "
                            f"below the {HEIGHT} px first screen")
    assert not problems, "\n".join(problems)


def test_a_chapter_shows_every_claim_of_its_box_on_the_first_screen(reader_pages):
    problems = []
    for name in PAPER_CHAPTERS:
        ends = reader_pages[name]["boxWords"]
        if not ends:
            problems.append(f"{name}: no verdict box")
        elif max(ends) > HEIGHT:
            problems.append(f"{name}: {sum(e > HEIGHT for e in ends)} of the box's {len(ends)} verdict words lie below "
                            f"the first screen (the last ends {max(ends):.0f} px down)")
    assert not problems, "\n".join(problems)


def test_nothing_is_wider_than_its_column_unless_it_scrolls_in_its_box(reader_pages):
    problems = [f"{name}: {item}" for name, found in reader_pages.items() for item in found["wide"]]
    assert not problems, "\n".join(problems[:40])


def test_figures_are_shown_near_full_size_and_described(reader_pages):
    problems = []
    for name, found in reader_pages.items():
        for image in found["images"]:
            ratio = image["shown"] / image["natural"]
            if ratio < 0.72:
                problems.append(f"{name}: {image['src']} shown at {ratio:.2f} of its size (tick labels under 10 px)")
            alt = image["alt"].strip()
            if len(alt) < 20 or alt.endswith((".png", ".jpg", ".svg")) or "/" in alt or alt == image["src"]:
                problems.append(f"{name}: {image['src']} has no describing alt text ({alt!r})")
    assert not problems, "\n".join(problems[:40])


EFFECT_FOUR_DECIMALS = re.compile(r"[+\-−]\d+\.\d{4,}\b")
MINUS_ZERO = re.compile(r"(?<![\d.])[-−]0\.0+(?![\d])")


def test_the_visible_text_has_no_nan_none_or_overprecise_effects(reader_pages):
    """Anywhere on a page: no "nan", "None" or effect to four decimals. In the verdict rows (and
    KnFu's headline), which print effects at one precision, no "-0.0" either."""
    problems = []
    for name, found in reader_pages.items():
        checks = [(found["text"], "nan", re.compile(r"(?<!became )(?<!is )\bnan\b", re.I)),  # not "the loss became nan"
                  (found["text"], "None", re.compile(r"\bNone\b")),
                  (found["text"], "an effect to four decimals", EFFECT_FOUR_DECIMALS),
                  (found.get("verdictText", ""), "-0.0 in a verdict row", MINUS_ZERO)]
        for text, label, pattern in checks:
            hits = [text[max(0, m.start() - 40):m.end() + 20].replace("\n", " ") for m in pattern.finditer(text)]
            if hits:
                problems.append(f"{name}: {label} {len(hits)} times, e.g. {hits[0]!r}")
    assert not problems, "\n".join(problems)


def test_knfu_tuning_finding_stands_on_the_landing_and_claims_pages(reader_pages):
    """KnFu's headline (its lead over FedMD under an equal tuning budget, beside the lead as first
    coded) is on the landing page, the Claims page and the chapter, within their first screens'
    reach: named in the text, with numbers computed from the records."""
    for name in ("intro", "claims", "knfu"):
        text = reader_pages[name]["text"]
        assert re.search(r"(same|equal) tuning budget", text), f"{name}: KnFu's tuning finding is not on the page"
        assert re.search(r"KnFu's lead over FedMD falls from [+\-−]\d", text), f"{name}: the lead as first coded is not given"


def test_page_heights_are_reported(reader_pages, capsys):
    """Not a check: prints each page's height, for the closing note of a layout change."""
    with capsys.disabled():
        print("\npage heights (px): " + ", ".join(f"{name} {found['height']:,}" for name, found in reader_pages.items()))
