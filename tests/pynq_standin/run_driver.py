"""Run a project's generated driver on the stand-in board and save what it computed (a test helper,
run by tests/test_driver.py with .venv-pynq's python and FPGAPLACE_PYNQ_STANDIN=1).

    python run_driver.py PROJECT OUT.npz OUT.json

``OUT.npz`` gets ``run.<output>`` (each sample of ``host/samples.npz`` through ``Driver.run``,
stacked) and ``many.<output>`` (all of them through one ``Driver.run_many``); ``OUT.json`` the
device pynq used, the one-line errors of a call with a missing input and one with a wrong shape,
and the driver's fps.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np


def load_driver(project: Path):
    spec = importlib.util.spec_from_file_location("project_driver", project / "host" / "driver.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def error_of(call) -> str:
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test checks the type and message
        return f"{type(error).__name__}: {error}"
    return ""


def main(project: Path, out_npz: Path, out_json: Path) -> None:
    import pynq

    module = load_driver(project)
    driver = module.Driver(project)
    data = np.load(project / "host" / "samples.npz")
    names = [i["name"] for i in driver.graph_inputs]
    count = data[f"input.{names[0]}"].shape[0]
    feeds = [{name: data[f"input.{name}"][k] for name in names} for k in range(count)]
    singles = [driver.run(feed) for feed in feeds]
    many = driver.run_many(feeds)
    fps = driver.fps
    arrays = {}
    for key, results in (("run", singles), ("many", many)):
        for name in driver.graph_outputs:
            arrays[f"{key}.{name}"] = np.stack([r[name] for r in results])
    np.savez(out_npz, **arrays)
    first = feeds[0]
    missing = {k: v for k, v in first.items() if k != names[0]}
    wrong = {**first, names[0]: np.zeros((*first[names[0]].shape, 2), dtype=np.float32)}
    report = {"device": type(pynq.Device.active_device).__name__, "fps": fps,
              "missing_input": error_of(lambda: driver.run(missing)),
              "wrong_shape": error_of(lambda: driver.run(wrong)),
              "overlay_ips": sorted(driver.overlay.ip_dict) if driver.overlay is not None else []}
    out_json.write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
