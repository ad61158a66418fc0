"""Chapters as users run them: twins in sync, papermill parameters validated clearly."""

from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest

from tools.ipc_kernels import AsyncUnixSocketKernelManager, execute_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))


def code_cells(notebook):
    return [c.source.strip() for c in notebook.cells if c.cell_type == "code"]


def test_there_are_chapters():
    assert "setting" in CHAPTERS


def test_the_tests_kernels_talk_over_unix_sockets_that_no_other_process_can_take(tmp_path):
    """TCP ports chosen before a kernel binds them can be taken meanwhile (tools/ipc_kernels.py)."""
    import nbval.kernel

    kernel = nbval.kernel.RunningKernel("python3", cwd=str(tmp_path))  # as nbval starts one, in another folder
    try:
        info = kernel.km.get_connection_info()
        assert info["transport"] == "ipc" and Path(info["ip"]).is_absolute()
        assert Path(f"{info['ip']}-{info['shell_port']}").is_socket()
        reply = kernel.kc.execute_interactive("x = 6 * 7", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kernel.stop()
    assert not Path(f"{info['ip']}-{info['shell_port']}").exists()  # its socket files go with it


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_ipynb_twin_matches_its_jupytext_source(chapter):
    source = jupytext.read(NOTEBOOKS / f"{chapter}.py")
    twin = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
    assert code_cells(twin) == code_cells(source), "run: .venv/bin/python tools/sync_notebooks.py " + chapter


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_a_parameters_cell_and_profiles(chapter):
    twin = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
    assert any("parameters" in c.metadata.get("tags", []) for c in twin.cells)
    assert (NOTEBOOKS / "params" / "quick" / f"{chapter}.yaml").exists()
    assert (NOTEBOOKS / "params" / "paper" / f"{chapter}.yaml").exists()


@pytest.fixture(scope="module")
def chapter_kernel():
    """Executes a chapter through papermill with given parameters, each time on one kernel
    of this module whose namespace is emptied first (``%reset -f``), the first time freshly started.
    Each check still goes through papermill's injected parameters cell, the chapter's validation and
    papermill's error; only the chapter's imports (torch, pandas, scikit-learn: most of a check's
    seconds) are not loaded again, and no name of one check's parameters is left for the next."""
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_core.utils import run_sync

    manager = AsyncUnixSocketKernelManager(kernel_name="python3")
    run_sync(manager.start_kernel)()
    client = BlockingKernelClient()  # its own sockets, outside papermill's event loop
    client.load_connection_info(manager.get_connection_info())
    client.start_channels()
    # Until the kernel answers, its first messages on the output channel can be published before our
    # subscription is in place and are lost: the first %reset then waited 60 s for output that had
    # gone and failed (a fresh clone's CI run, the kernel slow to start beside the other worker).
    client.wait_for_ready(timeout=120)

    def execute(chapter, parameters, output):
        reply = client.execute_interactive("%reset -f", timeout=60)
        assert reply["content"]["status"] == "ok"
        execute_notebook(NOTEBOOKS / f"{chapter}.ipynb", output, parameters=parameters, progress_bar=False,
                         km=manager)

    try:
        yield execute
    finally:
        client.stop_channels()
        run_sync(manager.shutdown_kernel)(now=True)


@pytest.mark.parametrize("chapter, parameters, message", [
    ("setting", {"alphas": "-1"}, "alphas must all be > 0"),
    ("setting", {"num_clients": 0}, "num_clients must be an integer >= 1"),
    ("setting", {"datasets": "imagenet"}, "datasets must be among"),
    ("setting", {"algorithms": "fedsgd"}, "algorithm must be one of"),
    ("setting", {"samples_per_client": 20_000}, "samples_per_client"),
    ("setting", {"alpha": 0.1}, "unknown parameter(s) 'alpha' (did you mean 'alphas'?)"),
    ("setting", {"seeds": "abc"}, "parameter 'seeds' must be an integer (got 'abc', a str)"),
    ("setting", {"local_epochs": 0}, "parameter 'local_epochs' must be >= 1: with no local epoch the clients never train"),
    ("fedua", {"sample_ratio": 1.5}, "sample_ratio must be in (0, 1]"),
    ("fedgmkd", {"methods": "fedavg,fedgmkdd"}, "methods must be among"),
])
def test_bad_parameters_through_papermill_give_one_clear_error(chapter_kernel, tmp_path, chapter, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        chapter_kernel(chapter, parameters, tmp_path / "out.ipynb")
    assert error.value.ename == "ValueError"
    assert message in error.value.evalue


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_parameters_cell_is_written_from_the_chapters_params(chapter):
    """tools/sync_notebooks.py writes it: one `name = default` line per field of Params, in order."""
    from fedkd_core.chapters import chapter_module, parameters_cell

    source = jupytext.read(NOTEBOOKS / f"{chapter}.py")
    cell = next(c for c in source.cells if "parameters" in c.metadata.get("tags", []))
    assert cell.source.strip() == parameters_cell(chapter_module(chapter).Params), \
        "run: .venv/bin/python tools/sync_notebooks.py " + chapter


def test_a_parameters_cell_is_python_that_sets_every_field_to_its_default():
    import dataclasses

    from fedkd_core.chapters import parameters_cell

    @dataclasses.dataclass(frozen=True)
    class Params:
        profile: str = "smoke"
        alphas: str = ""
        lr: float = 1e-5
        seeds: int = 2
        mixed_precision: bool | str = "auto"
        reuse: bool = False

    namespace: dict = {}
    exec(parameters_cell(Params), namespace)
    assert {k: namespace[k] for k in ("profile", "alphas", "lr", "seeds", "mixed_precision", "reuse")} == \
        dataclasses.asdict(Params())
    assert parameters_cell(Params).splitlines()[0] == 'profile = "smoke"'


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_parameters_cell_defaults_are_the_chapters_smoke_params(chapter):
    import dataclasses

    from fedkd_core.chapters import chapter_module

    twin = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
    cell = next(c for c in twin.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)  # flat scalar assignments only
    defaults = dataclasses.asdict(chapter_module(chapter).Params())
    assert {k: namespace[k] for k in defaults} == defaults
