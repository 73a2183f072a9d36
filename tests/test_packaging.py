"""A non-editable install ships the boards and templates as package data."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_carries_boards_and_templates(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=600,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("fpgaplace-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped_boards = {p.name for p in (ROOT / "boards").glob("*.yaml")}
    assert shipped_boards, "no board files in boards/"
    assert {f"fpgaplace/boards/{name}" for name in shipped_boards} <= names
    templates = {
        p.relative_to(ROOT / "hls_templates").as_posix()
        for p in (ROOT / "hls_templates").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {f"fpgaplace/hls_templates/{t}" for t in templates} <= names
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fpgaplace").rglob("*.py")}
    assert len(modules) > 50 and modules <= names, sorted(modules - names)  # every package of the tree ships
    testbenches = {f"fpgaplace/testbenches/{p.name}" for p in (ROOT / "sim").glob("*.py")}
    assert {"fpgaplace/testbenches/rtl_stream_tb.py", "fpgaplace/testbenches/run_rtl.py"} <= testbenches <= names


def test_what_the_commands_run_is_in_the_default_install():
    """`fpgaplace sim --rtl` needs cocotb: it comes with the first README command, not a test extra."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("=")[0].split("[")[0].strip() for dep in project["dependencies"]}
    assert {"cocotb", "jinja2", "pyscipopt", "onnxruntime"} <= names
    assert all("cocotb" not in dep for extra in project["optional-dependencies"].values() for dep in extra)
