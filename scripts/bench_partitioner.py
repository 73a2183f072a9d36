"""What the graph optimizer and the search buy on real architectures: one table.

    python scripts/bench_partitioner.py [--board zcu102] [--search-time 60]

For the onnx package's ResNet-50 and Inception-v2 structures and a BERT-style encoder layer,
before and after the graph optimizer: ONNX node count, ops the placer sees, the optimal
pipelined max-load (exact DP, us per sample) on the board, and the bytes that cross devices in
the split of that placement (after the placement passes: one send per tensor and device).
Then the automatic search's wall time and its best setting.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import onnx

from fpgaplace.flow.design import Design
from fpgaplace.flow.search import search
from fpgaplace.model.zoo import bert_encoder_layer, light_model_path


def model_files(folder: Path) -> dict[str, Path]:
    bert = folder / "bert_encoder_layer.onnx"
    onnx.save(bert_encoder_layer(seq=128, hidden=256, heads=4, batch=1), bert)
    return {
        "resnet50": light_model_path("resnet50"),
        "inception_v2": light_model_path("inception_v2"),
        "bert_encoder": bert,
    }


def measure(path: Path, board: str, optimized: bool, folder: Path) -> dict:
    start = time.perf_counter()
    design = Design(path, board, optimize=optimized)
    result = design.place("throughput", "dp", time_limit=120)
    manifest, errors = design.split(folder / f"{path.stem}-{optimized}")
    moved = manifest.stats["transfers_after"]
    return {
        "onnx_nodes": len(design.graph.model.graph.node),
        "placed_ops": design.problem.n,
        "max_load_us": result.value,
        "transfers": moved["count"],
        "transfer_bytes": moved["bytes"],
        "max_rel_error": max(errors.values(), default=0.0),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="zcu102")
    parser.add_argument("--search-time", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(
            f"{'model':14} {'optimizer':9} {'nodes':>6} {'ops':>5} {'max-load us':>12} "
            f"{'transfers':>9} {'bytes moved':>12} {'rel err':>8} {'seconds':>8}"
        )
        searches = []
        for name, path in model_files(folder).items():
            for optimized in (False, True):
                row = measure(path, args.board, optimized, folder)
                print(
                    f"{name:14} {'on' if optimized else 'off':9} {row['onnx_nodes']:6d} {row['placed_ops']:5d} "
                    f"{row['max_load_us']:12.1f} {row['transfers']:9d} {row['transfer_bytes']:12,d} "
                    f"{row['max_rel_error']:8.1e} {row['seconds']:8.1f}",
                    flush=True,
                )
            start = time.perf_counter()
            ranked = search(path, args.board, time_limit=args.search_time)
            searches.append((name, time.perf_counter() - start, len(ranked), ranked[0]))
        print()
        print(f"{'model':14} {'search s':>9} {'candidates':>10} {'best us/sample':>15}  best setting")
        for name, seconds, count, best in searches:
            print(f"{name:14} {seconds:9.1f} {count:10d} {best.per_sample_throughput:15.1f}  {best.candidate.label()}")


if __name__ == "__main__":
    main()
