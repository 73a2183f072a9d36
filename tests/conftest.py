"""Shared fixtures: the small built-in models, the onnx package's light model zoo, and one compiled project."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from fpgaplace import Design
from fpgaplace.model import zoo as models
from fpgaplace.model.frontend.load import load_onnx
from fpgaplace.model.ir import OpGraph

FAST_CLUSTER = str(Path(__file__).resolve().parent / "boards" / "cluster-2x-zcu104-fast.yaml")
"""Two zcu104 over a network as fast as DRAM: small models spread over both nodes (tests of names and links)."""

WORKLOADS = Path(__file__).resolve().parent / "workloads"
"""The paper's public placement workloads (MIT licence: see workloads/README.md), copied into the tests."""


@pytest.fixture(scope="session")
def mlp_model() -> onnx.ModelProto:
    """MLP with a symbolic batch dim 'N'."""
    return models.mlp(batch="N")


@pytest.fixture(scope="session")
def cnn_model() -> onnx.ModelProto:
    return models.cnn_residual()


@pytest.fixture(scope="session")
def bert_model() -> onnx.ModelProto:
    return models.bert_encoder_layer()


@pytest.fixture(scope="session")
def multi_io_model() -> onnx.ModelProto:
    return models.multi_io()


@pytest.fixture(scope="session")
def resnet50_path() -> Path:
    return models.light_model_path("resnet50")


@pytest.fixture(scope="session")
def resnet50_graph(resnet50_path: Path) -> OpGraph:
    return load_onnx(resnet50_path)


@pytest.fixture(scope="session")
def vgg19_graph() -> OpGraph:
    return load_onnx(models.light_model_path("vgg19"))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory) -> Path:
    """Keep the CPU-cost cache of every test (and of the CLI processes they start) out of the
    user's ~/.cache: a session-wide temporary XDG_CACHE_HOME. YoWASP's machine code of the ECP5
    tools (compiled from their WebAssembly once, minutes of CPU; ``scripts/warm_caches.py`` does it
    at set-up) stays where it was: it is the tools' own, not a result of ours."""
    import os

    import platformdirs

    folder = tmp_path_factory.mktemp("xdg-cache")
    previous = {key: os.environ.get(key) for key in ("XDG_CACHE_HOME", "YOWASP_CACHE_DIR")}
    os.environ.setdefault("YOWASP_CACHE_DIR", platformdirs.user_cache_dir("YoWASP", appauthor=False))
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def cnn_project(tmp_path_factory) -> Path:
    """The built-in CNN compiled for zcu104 cut into two cores (zcu104-dpu; int8 calibrated on 2
    random samples), shared by the tests that only read a project: do not change it (copy it first)."""
    folder = tmp_path_factory.mktemp("cnn") / "project"
    design = Design(models.cnn_residual(batch=1), "zcu104-dpu", profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(folder)
    return folder
