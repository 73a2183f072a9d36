"""The project record (``fpgaplace.project.record``): what compile writes reads back the same, and a
damaged design.json is one line naming the field and what was expected."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fpgaplace.project import layout
from fpgaplace.project.record import DESIGN_FORMAT, DesignRecord, load, load_design
from fpgaplace.util.errors import FpgaplaceError


@pytest.fixture(scope="module")
def project(cnn_project: Path) -> Path:
    return cnn_project  # conftest's compiled CNN, only read here


@pytest.fixture
def document(project: Path) -> dict:
    return json.loads((project / layout.DESIGN_FILE).read_text())


def error_of(document: dict) -> str:
    with pytest.raises(FpgaplaceError) as caught:
        DesignRecord.from_json(document)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{layout.DESIGN_FILE}: ")
    return message.removeprefix(f"{layout.DESIGN_FILE}: ")


def test_what_compile_writes_reads_back_the_same(project: Path, document: dict) -> None:
    record = load(project)
    assert record.to_json() == document and list(record.to_json()) == list(document)
    assert record.format == DESIGN_FORMAT and record.split == layout.SPLIT_MANIFEST
    assert [core.folder for core in record.cores] == [layout.core_folder(core.name) for core in record.cores]
    assert load_design(project) == document
    for core in record.cores:
        assert (project / core.folder / layout.LAYERS_FILE).is_file()
        assert {stage.op for stage in core.stages} - {None} <= {layer.op for layer in core.layers}


def test_a_value_out_of_range_names_its_path(document: dict) -> None:
    core = document["cores"][0]
    core["layers"][3]["pe"] = -1_000_000_000
    assert error_of(document) == f"cores.{core['name']}.layers[3].pe: expected an int >= 1, got -1000000000"


@pytest.mark.parametrize(("value", "expected"), [
    (None, "expected an int >= 1, got null"), (float("nan"), "got NaN"), ("16", "got '16'"), (True, "got true"),
    (10**30, "expected an int <= 1000000000000000, got 1000000000000000000000000000000"), ([1], "got [1]")])
def test_a_value_of_the_wrong_type_is_named(document: dict, value, expected: str) -> None:
    document["cores"][0]["interval_cycles"] = value
    message = error_of(document)
    assert message.startswith(f"cores.{document['cores'][0]['name']}.interval_cycles: ") and expected in message


def test_a_missing_field_says_what_it_expects(document: dict) -> None:
    broken = copy.deepcopy(document)
    del document["cores"][1]["layers"][0]["cycles"]
    assert error_of(document).endswith(".layers[0].cycles: missing; expected an int >= 0")
    del broken["transfers"]
    assert error_of(broken) == "transfers: missing; expected a list"


def test_numbers_are_finite(document: dict) -> None:
    document["transfers"][0]["us"] = float("inf")
    assert "transfers[0].us: expected a finite number >= 0" in error_of(document)


def test_shapes_are_bounded_and_consistent(document: dict) -> None:
    port = document["cores"][0]["inputs"][0]
    port["shape"] = [1, 10**6, 10**6, 16]
    assert "inputs[0].shape: expected a shape of at most" in error_of(document)
    port["shape"] = [1, 3, 5, 7]
    assert "inputs[0].sample_shape: expected a divisor of shape [1, 3, 5, 7]" in error_of(document)


def test_cross_references(document: dict) -> None:
    transfers = copy.deepcopy(document)
    transfers["transfers"][0]["to_device"] = "core9"
    assert error_of(transfers) == "transfers[0].to_device: expected a device of the design, got 'core9'"
    ports = copy.deepcopy(document)
    ports["transfers"][0]["tensor"] = "nowhere"
    assert "transfers[0].tensor: expected a port of" in error_of(ports)
    layers = copy.deepcopy(document)
    layers["cores"][0]["layers"][1]["inputs"] = ["nowhere"]
    assert "layers[1].inputs[0]: expected a core input or an earlier layer's output, got 'nowhere'" in error_of(layers)
    stages = copy.deepcopy(document)
    stage = next(s for s in stages["cores"][0]["stages"] if s["op"])
    stage["op"] = "nowhere"
    assert "expected an op of the core's layers, got 'nowhere'" in error_of(stages)
    twice = copy.deepcopy(document)
    twice["cores"][1]["name"] = twice["cores"][0]["name"]
    assert error_of(twice).startswith("cores[1]: expected a name used once")


def test_paths_stay_inside_the_project(document: dict) -> None:
    document["cores"][0]["folder"] = "../elsewhere"
    assert "folder: expected a path inside the project, got '../elsewhere'" in error_of(document)


@pytest.mark.parametrize("text", ["{", "[]", '{"format": 2, "cores": []}'])
def test_not_a_record(tmp_path: Path, text: str) -> None:
    (tmp_path / layout.DESIGN_FILE).write_text(text)
    with pytest.raises(FpgaplaceError, match=r"design\.json: not (readable JSON|a design\.json of format 1)"):
        load(tmp_path)
    with pytest.raises(FpgaplaceError, match="no design.json"):
        load(tmp_path / "missing")
