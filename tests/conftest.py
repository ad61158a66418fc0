"""Which tests are slow: ``make test-fast`` (``pytest tests -m "not slow"``) leaves them out, ``make
test`` (the README's command, CI's) runs them with the rest.

A test is slow when it starts processes (Ray, Flower's SuperLink and SuperNodes, sweep workers, a
notebook kernel, Chromium), runs every registered algorithm end to end, or takes tens of seconds on
two cores for real runs or the whole ledger (read off ``make test``'s --durations). They are listed here, by
node id prefix, rather than marked in their files, so one place says what the fast loop leaves
out and why; a test file's own ``pytest.mark.slow`` works too.
"""

import pytest

SLOW = {
    # every registered algorithm end to end (each one's numbers, contract and device cleanliness)
    "tests/test_conformance.py::test_every_registered_algorithm_keeps_the_contract": "every algorithm",
    "tests/test_conformance_flower.py": "every algorithm through Flower's ClientApp; Ray",
    "tests/test_device.py::test_every_algorithm_runs_device_clean_on_the_stand_in_device": "every algorithm",
    "tests/test_device.py::test_no_model_keeps_gradients_between_rounds": "every algorithm",
    "tests/test_device.py::test_chapter_helpers_run_on_the_stand_in_device": "chapter loops under the check",
    # processes: Ray, Flower's deployment, sweep workers, kernels, Chromium
    "tests/test_book_browser.py": "builds the book from every chapter, opens it in Chromium (both checks of it)",
    "tests/test_flower.py::test_the_command_gives_the_in_process_numbers": "Ray",
    "tests/test_flower.py::test_ray_that_cannot_start": "Ray",
    "tests/test_flower.py::test_the_deployment_command_sequence": "SuperLink, SuperNodes, flwr run",
    "tests/test_ray_sweep.py": "Ray",
    "tests/test_gpu_session.py::test_the_session_runs_its_steps_on_a_cpu": "sweep worker processes",
    "tests/test_sweep.py::test_two_workers_run_every_run": "worker processes",
    "tests/test_sweep.py::test_a_sweep_stopped_with_sigterm": "worker processes",
    "tests/test_notebooks.py": "notebook kernels",
    # the longest runs and ledgers on real data (each tens of seconds on 2 cores)
    "tests/test_knfu.py::test_cifar_claims_move_onto_the_tuned_rerun": "the whole ledger",
    "tests/test_knfu.py::test_knfu_against_fedmd_as_its_authors_run_it": "the whole ledger",
    "tests/test_knfu.py::test_the_ledger_reads_mnist_tuned_and_cifar": "the whole ledger",
    "tests/test_knfu.py::test_all_four_methods_learn_on_mnist": "four real runs",
    "tests/test_smoke_book_verdicts.py": "the whole ledger (read from the smoke book's cache in a whole run)",
    "tests/test_glance.py::test_the_landing_page_gives_each_paper_its_own_table": "the whole ledger",
    "tests/test_prediction_memo.py::test_a_run_with_partial_participation": "real runs, twice",
    "tests/test_experiment.py::test_fedavg_reports_global_accuracy_and_local_none": "real runs",
    "tests/test_experiment.py::test_a_decayed_lr_reaches_training": "real runs",
    "tests/test_experiment.py::test_short_real_run_learns_well_above_chance": "real runs",
    "tests/test_experiment.py::test_same_config_and_seed_give_the_identical_history": "real runs",
    "tests/test_sweep.py::test_a_sweep_leaves_a_run_that_a_sweep_of_another_profile_holds": "a sweep of real runs",
    "tests/test_sweep.py::test_the_dry_run_names_the_pace_and_machine_once_runs_are_done": "a sweep of real runs",
    "tests/test_sweep.py::test_a_run_that_diverges_is_stored_reported": "a sweep of real runs",
    "tests/test_fedua.py::test_all_three_methods_learn_on_real_cifar10": "three real CIFAR-10 runs",
    "tests/test_compare.py::test_a_new_method_is_ranked_in_the_chapters_cells": "a comparison's real runs",
    "tests/test_compare.py::test_the_chapters_runs_come_from_stored_records": "a comparison's real runs",
}


# The files that take longest, longest first (read off make test's --durations). Under ``-n 2
# --dist loadfile`` each file (or the smoke book, below) runs whole on one worker, so the suite ends when
# its longest chain of files does: starting the long files first and leaving the many short files
# to fill in behind them keeps both workers busy to the end. xdist would otherwise hand out files
# by their number of tests, many first, which put the book's file last, on one worker, with the
# other idle. Only the order changes: every test still runs.
LONG_FIRST = (
    "notebooks/",
    "tests/test_book_browser.py",
    "tests/test_smoke_book_verdicts.py",
    "tests/test_flower.py",
    "tests/test_conformance_flower.py",
    "tests/test_gpu_session.py",
    "tests/test_ledger.py",
    "tests/test_knfu.py",
    "tests/test_conformance.py",
    "tests/test_device.py",
    "tests/test_sweep.py",
    "tests/test_ray_sweep.py",
)
# The chapters (nbval), the book's browser checks and the check that the book's verdicts find the
# committed records are one unit of work, on one worker, chapters first: the book is built from the
# chapters as nbval executed them (tools/smoke_book.py), so each chapter runs once per session, and
# the verdicts' check reads the ledger rows the chapters cached. Within it the Add-your-method page runs after KnFu, whose smoke
# runs its comparison reads from the records instead of running them again. (pytest-xdist's own
# --dist loadgroup cannot do this under pytest 9: it renames a test's nodeid through an attribute
# pytest 9 no longer reads, so every test became its own unit; measured 2026-11-29.)
SMOKE_BOOK = ("notebooks/", "tests/test_book_browser.py", "tests/test_smoke_book_verdicts.py")
CHAPTER_ORDER = ("setting", "knfu", "fedua", "fedgmkd", "fedckd", "claims", "scaling", "add_your_method")


def work_unit(nodeid: str) -> str:
    """What one xdist worker runs whole: the smoke book (every chapter and the book's checks), or
    the test's own file (--dist loadfile's unit: its module fixtures built once)."""
    return "smoke_book" if nodeid.startswith(SMOKE_BOOK) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with the smoke book as one unit (:func:`work_unit`); other modes as xdist has them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SmokeBookScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SmokeBookScheduling(config, log)


@pytest.fixture(scope="session")
def _empty_ledger():
    from fedkd_core.chapters import ledger

    return ledger.ledger()


@pytest.fixture()
def empty_ledger(_empty_ledger):
    """``ledger.ledger()`` over the tests' throw-away results folder (no committed records), computed
    once per worker (tens of seconds on two cores) and handed to each test as its own deep copy:
    the same frame each test computed for itself, which only reads it."""
    return _empty_ledger.copy(deep=True)


def long_first(nodeid: str) -> tuple[int, int]:
    rank = next((rank for rank, prefix in enumerate(LONG_FIRST) if nodeid.startswith(prefix)), len(LONG_FIRST))
    chapter = nodeid.removeprefix("notebooks/").split(".", 1)[0]
    return rank, CHAPTER_ORDER.index(chapter) if chapter in CHAPTER_ORDER else len(CHAPTER_ORDER)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts processes, runs every algorithm, or takes tens of seconds "
                                       "(make test-fast leaves it out; tests/conftest.py lists them)")
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below (see LONG_FIRST)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith("notebooks/") or any(item.nodeid.startswith(prefix) for prefix in SLOW):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: long_first(item.nodeid))  # stable: a file's tests, a notebook's cells keep their order
