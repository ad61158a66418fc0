"""The book's verdicts find the committed records: every chapter's ledger rows as the book computes
them (tools/smoke_book.py's environment: the committed records, the session's ledger cache).

This file is part of the smoke book's unit of work (tests/conftest.py: ``SMOKE_BOOK``), after the
chapters: nbval's kernels have then computed and cached these rows for the chapters' verdict boxes
(fedkd_core.chapters.ledger_cache, keyed by the records and the code they read), and this test reads
the same value instead of computing it a second time on the other worker (12-22 s of ``make test``).
Run alone, it computes them.
"""

from pathlib import Path

from fedkd_core import verdicts as V
from fedkd_core.chapters import ledger, ledger_cache
from tools import smoke_book

ROOT = Path(__file__).resolve().parents[1]


def test_every_chapters_ledger_finds_the_committed_records(request):
    """Read from the committed records (conftest points FEDKD_RESULTS elsewhere; the smoke book's
    results folder links them): a change of record keys that loses the book's evidence must fail
    here, not read "no committed records"."""
    from fedkd_core.chapters import CHAPTERS, chapter_module

    with smoke_book.within(smoke_book.session_folder(request.config)):
        for name in CHAPTERS:
            module = chapter_module(name)
            if not hasattr(module, "ledger_rows"):
                continue
            rows = ledger_cache.chapter_rows(module)
            tested = rows[rows.verdict != ledger.UNTESTABLE]
            assert len(tested) and ledger.NO_RECORDS not in set(tested.verdict), (name, tested[["claim", "verdict"]])
            assert all(text.startswith("profile ") for text in tested.evidence), name
            # each verdict's p-value agrees with its word before the chapter's correction: decided below 5%,
            # inconclusive not (or no interval); the correction's text stands beside exactly those decided
            # before it, and a word it does not keep reads "inconclusive after correction"
            judged = ledger.with_holm(rows)
            before = judged[ledger.UNCORRECTED]
            decided = before.map(V.is_decided)
            assert (judged.p[decided] < 0.05).all() and not (judged.p[before == "inconclusive"] < 0.05).any(), name
            family = judged[ledger.HOLM_COLUMN]
            assert (family[decided] != "").all() and (family[~decided] == "").all(), name
            dropped = family.map(ledger.not_kept_by_holm)
            assert (judged.verdict[dropped] == V.AFTER_CORRECTION).all(), name
    root = ROOT / "results"
    assert len(__import__("fedkd_core.chapters.knfu", fromlist=["x"]).paper_profile_records(root)) >= 216
