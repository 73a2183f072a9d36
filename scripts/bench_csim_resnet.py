"""C simulation before and after a change, side by side: ResNet-50 int8 on zcu104 (one image) and
the small CNN and MLP of scripts/bench_csim.py (fpgaplace only).

    .venv/bin/python scripts/bench_csim_resnet.py [--before REV] [--after REV|worktree] [--repeats 3]
                                                  [--models resnet50,cnn,mlp] [--samples 1000] [--workdir DIR] [--json]

Two variants of fpgaplace run the same steps: the ``--before`` commit's and the ``--after``
commit's ``fpgaplace`` package and templates (default: the commit before the C-simulation
shortcut of the beat kernels, and HEAD), each extracted with ``git archive`` into the work folder
and run with ``PYTHONPATH`` pointing there, i.e. with its own kernel headers, C entry and g++
flags; ``--after worktree`` runs the working tree instead (other sessions' uncommitted edits
included).

Each model is compiled once by the after variant (``fpgaplace compile MODEL --board B --out DIR``;
ResNet-50 from the onnx package's light zoo with seeded random weights on zcu104, the CNN and MLP
as bench_csim.py makes them, their QDQ models on pynq-z2), kept under ``--workdir`` and reused
while its sources are unchanged; the before variant simulates a copy of that project whose
``include/`` holds the before commit's kernel headers, so both simulate the same placement and
folding (other sessions' commits between the two change them). This assumes the two commits
render the same core sources apart from what the headers and csim's flags decide (true from
6250748 on: the after C entry embeds weights.bin only when csim defines FP_WMEM_FILE, which
6250748's csim does not, so it compiles wmem.h as before). ``--compile-each`` has each variant
compile its own projects instead; "same design" says whether the two projects placed and folded
the model alike (every core's stages and cycles in design.json). Then per repeat, interleaving the
variants so both see the same load, every core's ``build/`` folder is removed and ``fpgaplace csim`` runs (ResNet-50:
``--samples 1``; CNN and MLP: bench_csim.py's ``--samples`` seeded inputs): ``build s`` is its
g++ build of every core, ``run s`` the placed model's run time (cores in C, CPU pieces in
onnxruntime; the bit-exact checks are timed apart). The table gives the median over the repeats
and before / after; every run must report ``ok`` (bit-exact cores, outputs within 1 LSB).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_csim  # noqa: E402  (the CNN and MLP as its fpgaplace rows make them)

BEFORE = "6250748"  # the commit before the C-simulation shortcut of the beat kernels
DEFAULT_WORKDIR = Path("/tmp/fpgaplace-bench-csim-resnet")
MODELS = ("resnet50", "cnn", "mlp")
BOARDS = {"resnet50": "zcu104", "cnn": "pynq-z2", "mlp": "pynq-z2"}
SOURCES = ("fpgaplace", "hls_templates")  # what a variant's compile and csim run
TIMEOUT_SECONDS = 3600


@dataclass(frozen=True)
class Variant:
    name: str
    source: Path  # the folder holding fpgaplace/ and hls_templates/ of this variant

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.source)}

    def run(self, *arguments: str) -> dict:
        """``fpgaplace ARGUMENTS --json`` of this variant, its JSON document."""
        command = [sys.executable, "-m", "fpgaplace.cli.app", *arguments, "--json"]
        done = subprocess.run(command, capture_output=True, text=True, env=self.environment(),
                              timeout=TIMEOUT_SECONDS, cwd=self.source)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no message"]
            raise SystemExit(f"{self.name}: fpgaplace {arguments[0]} failed: {lines[-1].strip()}")
        return json.loads(done.stdout)

    def digest(self) -> str:
        """A hash of the variant's sources (its projects are recompiled when it changes)."""
        digest = hashlib.sha256()
        for folder in SOURCES:
            for path in sorted((self.source / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    digest.update(str(path.relative_to(self.source)).encode())
                    digest.update(path.read_bytes())
        return digest.hexdigest()[:16]

    def check_imports(self) -> None:
        """Fail unless this variant's interpreter imports fpgaplace and its templates from ``source``
        (an editable install must not put the working tree's in front)."""
        probe = ("import fpgaplace, importlib.resources as r; "
                 "print(fpgaplace.__file__); print(r.files('fpgaplace.hls_templates'))")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env=self.environment(), cwd=self.source, check=True)
        for line in done.stdout.split():
            if not Path(line).resolve().is_relative_to(self.source.resolve()):
                raise SystemExit(f"{self.name}: imports {line}, not from {self.source}")


def commit_variant(label: str, revision: str, workdir: Path) -> Variant:
    """A commit's sources, extracted once under ``workdir`` (templates also placed as the
    ``fpgaplace.hls_templates`` package so that they are found inside the extracted tree)."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout.strip()
    source = workdir / f"source-{commit}"
    if not (source / "fpgaplace" / "hls_templates").is_dir():
        partial = workdir / f".source-{commit}.tmp"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", "--format=tar", commit, *SOURCES], capture_output=True,
                                 cwd=ROOT, check=True).stdout
        archive_path = partial / "sources.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(partial, filter="data")
        archive_path.unlink()
        shutil.copytree(partial / "hls_templates", partial / "fpgaplace" / "hls_templates")
        shutil.rmtree(source, ignore_errors=True)
        partial.rename(source)
    return Variant(f"{label} ({commit})", source)


# ---------------------------------------------------------------- models and projects


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    csim_arguments: tuple[str, ...]  # how csim feeds it


def prepare_models(names: list[str], workdir: Path, samples: int) -> list[Model]:
    """Each model's ONNX file (and the CNN's and MLP's samples) under ``workdir/models``."""
    folder = workdir / "models"
    folder.mkdir(parents=True, exist_ok=True)
    prepared = []
    for name in names:
        if name == "resnet50":
            path = folder / "resnet50.onnx"
            if not path.is_file():
                from fpgaplace.model import zoo as models

                onnx.save(models.with_random_weights(onnx.load(str(models.light_model_path("resnet50")))), path)
            prepared.append(Model(name, path, ("--samples", "1")))
        else:
            case = bench_csim.prepare_case(name, folder, samples)
            prepared.append(Model(name, case.qdq_path, ("--inputs", str(case.samples_path))))
    return prepared


def compiled_project(variant: Variant, model: Model, workdir: Path) -> Path:
    """The model compiled by the variant (once per variant sources)."""
    project = workdir / "projects" / f"{model.name}-{variant.digest()}"
    if not (project / "design.json").is_file():
        print(f"{variant.name}: compiling {model.name} on {BOARDS[model.name]}", file=sys.stderr, flush=True)
        shutil.rmtree(project, ignore_errors=True)
        project.parent.mkdir(parents=True, exist_ok=True)
        variant.run("compile", str(model.path), "--board", BOARDS[model.name], "--out", str(project))
    return project


def simulate_from_scratch(variant: Variant, model: Model, project: Path) -> dict:
    """One csim of the project with every core rebuilt; its JSON (must be ok)."""
    for build in (project / "cores").glob("*/build"):
        shutil.rmtree(build)
    result = variant.run("csim", str(project), *model.csim_arguments)
    if not result["ok"]:
        raise SystemExit(f"{variant.name}: csim of {model.name} is not ok: {json.dumps(result)[:400]}")
    return result


# ---------------------------------------------------------------- measuring and printing


def design_summary(project: Path) -> list:
    """What the placement and folding decided, core by core: each stage's kernel, op and cycles."""
    document = json.loads((project / "design.json").read_text())
    return [(core["name"], core.get("compute_interval_cycles"),
             [(stage.get("kernel"), stage.get("op"), stage.get("cycles_model")) for stage in core.get("stages", [])])
            for core in document["cores"]]


def with_headers(project: Path, variant: Variant, workdir: Path) -> Path:
    """A copy of ``project`` (without its builds) whose ``include/`` is the variant's kernel headers."""
    copy = workdir / "projects" / f"{project.name}-headers-{variant.digest()}"
    if not (copy / "design.json").is_file():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build"))
        shutil.rmtree(copy / "include")
        shutil.copytree(variant.source / "hls_templates" / "hls" / "include", copy / "include")
    return copy


def projects_for(variants: list[Variant], models: list[Model], workdir: Path, compile_each: bool) -> dict:
    """(variant name, model name) -> the project that variant simulates."""
    before, after = variants
    if compile_each:
        return {(v.name, m.name): compiled_project(v, m, workdir) for v in variants for m in models}
    projects = {}
    for model in models:
        shared = compiled_project(after, model, workdir)
        projects[(after.name, model.name)] = shared
        projects[(before.name, model.name)] = with_headers(shared, before, workdir)
    return projects


def measure(variants: list[Variant], models: list[Model], repeats: int, workdir: Path,
            compile_each: bool = False) -> list[dict]:
    """One row per model: each variant's median build and run seconds over ``repeats``."""
    projects = projects_for(variants, models, workdir, compile_each)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in projects}
    for repeat in range(repeats):
        for model in models:
            for variant in variants:
                print(f"repeat {repeat + 1}/{repeats}: {variant.name} csim {model.name}", file=sys.stderr, flush=True)
                result = simulate_from_scratch(variant, model, projects[(variant.name, model.name)])
                times[(variant.name, model.name)].append((result["build_seconds"], result["run_seconds"]))
    rows = []
    for model in models:
        designs = [design_summary(projects[(v.name, model.name)]) for v in variants]
        row: dict = {"model": model.name, "board": BOARDS[model.name],
                     "samples": 1 if model.name == "resnet50" else None, "same_design": designs[0] == designs[1]}
        for variant, label in zip(variants, ("before", "after"), strict=True):
            runs = times[(variant.name, model.name)]
            row[label] = {"variant": variant.name, "build_seconds": statistics.median(b for b, _ in runs),
                          "run_seconds": statistics.median(r for _, r in runs), "runs": runs}
        rows.append(row)
    return rows


def render(rows: list[dict], samples: int, repeats: int) -> str:
    headers = ["model", "board", "samples", "same design", "build s before", "build s after", "build ratio",
               "run s before", "run s after", "run ratio"]
    lines = [headers]
    for row in rows:
        before, after = row["before"], row["after"]
        lines.append([row["model"], row["board"], str(row["samples"] or samples), "yes" if row["same_design"] else "NO",
                      f"{before['build_seconds']:.2f}", f"{after['build_seconds']:.2f}",
                      f"{before['build_seconds'] / after['build_seconds']:.2f}x",
                      f"{before['run_seconds']:.3f}", f"{after['run_seconds']:.3f}",
                      f"{before['run_seconds'] / after['run_seconds']:.2f}x"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in lines]
    names = f"{rows[0]['before']['variant']} vs {rows[0]['after']['variant']}" if rows else ""
    return "\n".join(text) + f"\n(medians of {repeats} runs; ratio = before / after; {names})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit measured as 'before'")
    parser.add_argument("--after", default="HEAD", help="the commit measured as 'after', or 'worktree'")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS), help=f"some of {', '.join(MODELS)}")
    parser.add_argument("--samples", type=int, default=1000, help="samples of the CNN and MLP runs")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--compile-each", action="store_true",
                        help="each variant simulates the projects it compiled (default: both the after variant's)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    if not names or any(name not in MODELS for name in names):
        raise SystemExit(f"--models: expected some of {', '.join(MODELS)}, got {args.models!r}")
    if args.repeats < 1:
        raise SystemExit("--repeats: expected at least 1")
    args.workdir.mkdir(parents=True, exist_ok=True)
    after = (Variant("after (working tree)", ROOT) if args.after == "worktree"
             else commit_variant("after", args.after, args.workdir))
    variants = [commit_variant("before", args.before, args.workdir), after]
    for variant in variants:
        variant.check_imports()
    rows = measure(variants, prepare_models(names, args.workdir, args.samples), args.repeats, args.workdir,
                   args.compile_each)
    print(json.dumps(rows, indent=2) if args.json else render(rows, args.samples, args.repeats))


if __name__ == "__main__":
    main()
