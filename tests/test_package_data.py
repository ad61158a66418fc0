"""An installed package (a wheel, not the checkout) carries every data file the chapters read."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_built_wheel_holds_the_papers_tables(tmp_path):
    source, dist = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT / "fedkd_core", source / "fedkd_core", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"],
                   cwd=source, check=True, capture_output=True)
    wheel, = dist.glob("*.whl")
    packaged = set(zipfile.ZipFile(wheel).namelist())
    tables = {path.relative_to(ROOT).as_posix() for path in (ROOT / "fedkd_core").rglob("paper_*.csv")}
    assert len(tables) >= 14 and tables <= packaged, sorted(tables - packaged)
