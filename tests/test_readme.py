"""The README says only what works: every command it shows names real files, make targets and
chapter parameters, and it carries no dated measurement (those live on the book's Performance
page, generated from benchmarks/results/)."""

import dataclasses
import importlib
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def shell_lines(text: str) -> list[str]:
    """The commands in the README's ```bash blocks, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines() if line.split("#")[0].strip()]


def test_the_readme_shows_the_two_commands_and_they_are_make_targets():
    lines = shell_lines(README)
    assert "make book" in lines and "make test" in lines
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    for target in re.findall(r"^make ([a-z]+)\b", "\n".join(lines), flags=re.M) + re.findall(r"`make ([a-z]+)\b", README):
        assert target in targets, f"README mentions 'make {target}', which the Makefile does not define"


@pytest.mark.parametrize("line", [line for line in shell_lines(README) if "papermill" in line])
def test_every_papermill_command_uses_real_notebooks_profiles_and_parameters(line):
    words = shlex.split(line)
    notebook = Path(words[words.index(next(w for w in words if w.endswith(".ipynb")))])
    assert (ROOT / notebook).exists(), notebook
    fields = {f.name for f in dataclasses.fields(importlib.import_module(f"fedkd_core.chapters.{notebook.stem}").Params)}
    for flag, value in zip(words, words[1:]):
        if flag == "-p":
            assert value in fields, f"{notebook.stem} has no parameter {value!r} ({line})"
        if flag == "-f":
            assert (ROOT / value).exists(), value


def test_every_file_the_readme_names_exists():
    for path in re.findall(r"`((?:notebooks|results|flower_app|tests|benchmarks|fedkd_core|book)/[\w./-]+\.\w+)`", README) \
            + re.findall(r"--params (\S+\.yaml)", README) + re.findall(r"`([A-Z]+\.md|environment\.yml)`", README):
        assert (ROOT / path).exists(), f"README names {path}, which does not exist"


def test_the_readme_carries_no_dated_measurement():
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", README), "dated logs belong on the Performance page"
    timings = re.findall(r"\b\d[\d,.]*\s*(?:min \d+ s|s per round|samples/s|GFLOP/s)", README)
    assert not timings, f"measured figures belong on the Performance page: {timings}"
