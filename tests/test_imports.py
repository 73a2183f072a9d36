"""The package's imports run one way (scripts/check_imports.py): no cycle, nothing against the layers."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_imports.py"


def _checker():
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_imports_run_downward_without_a_cycle():
    result = _checker().check(ROOT)
    assert result["modules"] > 80 and result["imports"] > 300  # it read the whole package
    assert result["against_layers"] == []
    assert result["cycles"] == []


def test_the_checker_finds_an_upward_import_and_a_cycle(tmp_path):
    """The checker itself: a copy of the package with one arrow against the layers and a cycle."""
    package = tmp_path / "fpgaplace"
    for path in (ROOT / "fpgaplace").rglob("*.py"):
        target = package / path.relative_to(ROOT / "fpgaplace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    (package / "util" / "errors.py").write_text(
        (package / "util" / "errors.py").read_text() + "\nfrom fpgaplace.flow import design  # noqa\n")
    (package / "util" / "a.py").write_text("from fpgaplace.util import b\n")
    (package / "util" / "b.py").write_text("def f():\n    from fpgaplace.util import a\n")
    result = _checker().check(tmp_path)
    assert any(line.startswith("fpgaplace.util.errors:") and "points up (util -> flow)" in line
               for line in result["against_layers"])
    assert ["fpgaplace.util.a", "fpgaplace.util.b"] in result["cycles"]
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1 and "cycle: fpgaplace.util.a <-> fpgaplace.util.b" in done.stdout
