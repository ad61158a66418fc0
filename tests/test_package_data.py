"""An installed package (a wheel, not the checkout) carries every data file the chapters read: the
papers' tables and the profiles (fedkd_core.chapters.datafiles)."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the checkout's package, as ``pip install .`` would build it."""
    tmp = tmp_path_factory.mktemp("wheel")
    source, dist = tmp / "source", tmp / "dist"
    shutil.copytree(ROOT / "fedkd_core", source / "fedkd_core", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks" / "params", source / "notebooks" / "params")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"],
                   cwd=source, check=True, capture_output=True)
    built, = dist.glob("*.whl")
    return built


def test_a_built_wheel_holds_the_papers_tables_and_the_profiles(wheel):
    packaged = set(zipfile.ZipFile(wheel).namelist())
    tables = {path.relative_to(ROOT).as_posix() for path in (ROOT / "fedkd_core").rglob("paper_*.csv")}
    profiles = {f"fedkd_core/chapters/params/{path.relative_to(ROOT / 'notebooks' / 'params').as_posix()}"
                for path in (ROOT / "notebooks" / "params").glob("*/*.yaml")}
    assert len(tables) >= 16 and tables <= packaged, sorted(tables - packaged)
    assert {f"fedkd_core/chapters/knfu/paper_table{n}.csv" for n in (1, 2)} <= tables
    assert len(profiles) >= 25 and profiles <= packaged, sorted(profiles - packaged)


def test_the_installed_package_reads_its_profiles_and_tables_without_the_checkout(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    script = ("import fedkd_core, fedkd_core.chapters.fedckd as c, fedkd_core.chapters.knfu as k; "
              "print(fedkd_core.__file__); print(c.REDUCED_PROFILE.pool_size, c.paper_table4()['mean'].tolist()); "
              "print(k.TUNED_PROFILE.schedules, len(k.paper_table1()), k.paper_table2()['mean'].iloc[0])")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert out[0].startswith(str(tmp_path / "site")) and out[1:] == [
        "4000 [57.08, 57.25]", "knfu=kept/-/1, fedmd=kept/-/1, knfu_local=kept/-/0, selective_fd=kept/-/1 48 72.0"]
