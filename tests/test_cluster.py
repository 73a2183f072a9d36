"""Pipelined run of a split model on a real local Ray cluster: outputs, faults, timeouts."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import ray

from fpgaplace.deploy.cluster import (
    MAX_START_STRETCH,
    InjectedFault,
    load_stretch,
    run_cluster,
    run_whole,
    start_local_ray,
)
from fpgaplace.flow.split import run_split, split_model
from fpgaplace.model import zoo as models
from fpgaplace.model.passes import name_nodes
from fpgaplace.model.passes.graph_tools import topological_order
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import random_inputs

SAMPLES = 8


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray for the whole module (start-up costs seconds); run_cluster reuses it."""
    start_local_ray(num_cpus=2)
    yield
    ray.shutdown()


def cut_in_chunks(model: onnx.ModelProto, devices: list[str]) -> dict[str, str]:
    """Equal-sized chunks of the topological order, chunk k on devices[k]."""
    named = onnx.ModelProto()
    named.CopyFrom(model)
    name_nodes(named)
    names = [node.name for node in topological_order(named.graph)]
    return {name: devices[i * len(devices) // len(names)] for i, name in enumerate(names)}


MODELS = {"cnn_residual": models.cnn_residual, "bert_encoder_layer": models.bert_encoder_layer}
HUNG_RUN_BOUND_S = 120  # the 3 s wait plus Ray's start and stop, on a host loaded by other tests (53 s seen)


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> dict[str, tuple[onnx.ModelProto, Path, list[dict[str, np.ndarray]]]]:
    """Each model split onto devices A and B (contiguous halves), with 8 random samples."""
    out = {}
    for name, build in MODELS.items():
        model = build()
        folder = tmp_path_factory.mktemp(name) / "split"
        split_model(model, cut_in_chunks(model, ["A", "B"]), folder)
        out[name] = (model, folder, [random_inputs(model, seed) for seed in range(SAMPLES)])
    return out


def assert_same_outputs(actual: list[dict], expected: list[dict]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_pipeline_equals_whole_model_and_sequential_split(splits, name):
    model, folder, samples = splits[name]
    seen = []
    result = run_cluster(folder, samples, timeout_s=60, progress=lambda done, total: seen.append((done, total)))
    whole = run_whole(model, samples)
    assert_same_outputs(result.outputs, whole.outputs)
    assert_same_outputs(result.outputs, [run_split(folder, sample) for sample in samples])
    assert result.devices == ["A", "B"]
    assert result.samples == SAMPLES and result.throughput > 0 and whole.throughput > 0
    assert result.restarts == {"A": 0, "B": 0}
    assert set(result.stage_busy_s) == {"A", "B"} and all(t > 0 for t in result.stage_busy_s.values())
    assert result.stage_busy_s["A"] + result.stage_busy_s["B"] < result.wall_s * 2
    assert seen == [(i, SAMPLES) for i in range(1, SAMPLES + 1)]


def test_device_with_two_submodels(tmp_path):
    """A, B, A: actor A runs the first and the last piece; calls interleave correctly."""
    model = models.cnn_residual()
    folder = tmp_path / "split"
    manifest = split_model(model, cut_in_chunks(model, ["A", "B", "A"]), folder)
    assert [sub.device for sub in manifest.submodels] == ["A", "B", "A"]
    samples = [random_inputs(model, seed) for seed in range(4)]
    result = run_cluster(folder, samples, window=2)
    assert result.devices == ["A", "B"]
    assert_same_outputs(result.outputs, run_whole(model, samples).outputs)


def test_sample_count_draws_random_inputs(splits):
    model, folder, _ = splits["bert_encoder_layer"]
    result = run_cluster(folder, 3, seed=5)
    assert result.samples == 3
    shape = tuple(d.dim_value or 1 for d in model.graph.output[0].type.tensor_type.shape.dim)
    assert all(out["encoded"].shape == shape for out in result.outputs)
    assert not np.allclose(result.outputs[0]["encoded"], result.outputs[1]["encoded"])


def test_whole_model_from_file_and_count(tmp_path):
    model = models.mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    result = run_whole(path, 4, threads=1, seed=3)
    assert result.samples == 4 and result.threads == 1
    expected = run_whole(model, [random_inputs(model, 3 + i) for i in range(4)])
    assert_same_outputs(result.outputs, expected.outputs)


@pytest.mark.parametrize(("address", "expected"), [
    ("127.0.0.1:1", r"cluster address '127\.0\.0\.1:1': cannot connect"),
    ("no-port-here", r"cluster address 'no-port-here': expected HOST:PORT"),
])
def test_unreachable_address_fails_fast(splits, address, expected):
    _, folder, samples = splits["cnn_residual"]
    start = time.monotonic()
    with pytest.raises(FpgaplaceError, match=expected):
        run_cluster(folder, samples, address=address, timeout_s=30)
    assert time.monotonic() - start < 10


def test_corrupt_submodel_is_named(splits, tmp_path):
    _, folder, samples = splits["cnn_residual"]
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / "sub01_B.onnx").write_bytes(b"this is not an onnx model")
    with pytest.raises(FpgaplaceError, match=r"submodel 'sub01_B' on device 'B'.*onnxruntime cannot load it"):
        run_cluster(broken, samples, timeout_s=30)


def test_missing_submodel_file_is_named(splits, tmp_path):
    _, folder, samples = splits["cnn_residual"]
    broken = tmp_path / "missing"
    shutil.copytree(folder, broken)
    (broken / "sub00_A.onnx").unlink()
    with pytest.raises(FpgaplaceError, match=r"sub00_A\.onnx: file of submodel 'sub00_A' on device 'A' is missing"):
        run_cluster(broken, samples)


def test_sample_without_graph_input_is_named(splits):
    _, folder, _ = splits["cnn_residual"]
    with pytest.raises(FpgaplaceError, match=r"sample 0 lacks graph input 'image'"):
        run_cluster(folder, [{"wrong": np.zeros(3, np.float32)}])


def test_actor_killed_mid_stream_is_restarted(splits):
    """B dies after its third run and is restarted once; the outputs equal the whole model's
    (the restart is the same for any model: the transformer's split is checked by
    ``test_pipeline_equals_whole_model_and_sequential_split``)."""
    model, folder, samples = splits["cnn_residual"]
    result = run_cluster(folder, samples, timeout_s=60, max_restarts=1, fault=InjectedFault("B", after_runs=3))
    assert result.restarts == {"A": 0, "B": 1}
    assert_same_outputs(result.outputs, run_whole(model, samples).outputs)


@pytest.mark.parametrize(("max_restarts", "every_life", "most_finished"), [(0, False, 3), (1, True, 6)])
def test_actor_killed_past_the_restart_limit_stops_the_run(splits, max_restarts, every_life, most_finished):
    """A crashes after 3 runs in each allowed life: the run stops naming A, and reports no more
    finished samples than A could run before its last death. (How many of A's runs also got
    through B before the driver saw the death is a race, so there is no lower bound.)"""
    _, folder, samples = splits["cnn_residual"]
    fault = InjectedFault("A", after_runs=3, every_life=every_life)
    with pytest.raises(FpgaplaceError, match=r"actor of device 'A' died") as caught:
        run_cluster(folder, samples, timeout_s=60, max_restarts=max_restarts, fault=fault)
    finished = re.search(r"(\d+) of 8 samples finished", str(caught.value))
    assert finished is not None
    assert 0 <= int(finished.group(1)) <= most_finished
    assert "\n" not in str(caught.value)


def test_hung_stage_times_out_and_names_it(splits):
    """B hangs on its third run: the wait for that sample times out, naming B's submodel and the
    samples that finished (all before it; an earlier sample may stall instead on a loaded host)."""
    _, folder, samples = splits["cnn_residual"]
    start = time.monotonic()
    with pytest.raises(FpgaplaceError, match=r"sample \d+ waited 3 s for submodel 'sub01_B' on device 'B'; "
                                             r"\d+ of 8 samples finished") as caught:
        run_cluster(folder, samples, timeout_s=3, fault=InjectedFault("B", after_runs=2, action="hang"))
    stalled, finished = map(int, re.findall(r"(\d+) (?:waited|of 8)", str(caught.value)))
    assert stalled == finished <= 2
    assert time.monotonic() - start < HUNG_RUN_BOUND_S  # the hung actor is abandoned, not awaited



def test_more_actors_than_cluster_cpus_times_out(tmp_path):
    model = models.mlp()
    folder = tmp_path / "split"
    split_model(model, cut_in_chunks(model, ["A", "B", "C"]), folder)
    with pytest.raises(FpgaplaceError, match=r"actors of devices \[.+\] did not start within 2 s "
                                             r"\(each needs 1 CPU; the cluster has 2\)"):
        run_cluster(folder, 2, timeout_s=30, start_timeout_s=2)


@pytest.mark.parametrize(("load", "stretch"), [(0.3, 1.0), (3.0, 1.5), (1e6, MAX_START_STRETCH)])
def test_the_start_wait_stretches_with_the_load_per_cpu_within_bounds(monkeypatch, load, stretch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    assert load_stretch() == pytest.approx(stretch)
