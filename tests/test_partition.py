"""The cut of the fabric into cores is the tool's choice where the board file leaves it out
(issue 21, item 1): one core per SLR by default, the cuts ``board.partition`` offers, the compile
step keeping the cut whose folded placement is fastest (checked against each cut compiled on its
own as a board file that fixes it), search ranking the cuts beside its other settings, and a
board file that gives ``cores`` keeping them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.board.model import RESOURCES
from fpgaplace.board.partition import partitioned, partitions
from fpgaplace.flow.partition import TIE
from fpgaplace.flow.search import search
from fpgaplace.model import zoo as models
from fpgaplace.project.board import project_board
from fpgaplace.project.record import load
from fpgaplace.sim.event import simulate
from fpgaplace.util.errors import FpgaplaceError

BOARDS = Path(__file__).resolve().parents[1] / "boards"


@pytest.mark.parametrize("name", ["zcu104", "kv260", "alveo-u250"])
def test_a_board_without_cores_has_one_per_slr_and_offers_more(name):
    board = load_board(name)
    slrs = board.fabric["slrs"]
    assert not board.fixed_cores
    assert [core.region for core in board.cores] == list(range(slrs))
    assert partitions(board) == [slrs, 2 * slrs]
    for count in partitions(board):
        cut = partitioned(board, count)
        assert len(cut.cores) == count and len({core.kind_key for core in cut.cores}) == 1
        assert sorted({core.region for core in cut.cores}) == list(range(slrs))  # every SLR holds whole cores
        for key in RESOURCES:
            share = getattr(cut.cores[0], key)
            assert share == board.usable[key] // count and share * count <= board.usable[key]


def test_the_dpu_variant_fixes_two_cores_of_the_same_fabric():
    free, fixed = load_board("zcu104"), load_board("zcu104-dpu")
    assert fixed.fixed_cores and partitions(fixed) == [2]
    assert fixed.fabric == free.fabric and fixed.usable == free.usable
    assert [c.kind_key for c in fixed.cores] == [c.kind_key for c in partitioned(free, 2).cores]
    with pytest.raises(FpgaplaceError, match="cores are fixed at 2"):
        partitioned(fixed, 1)


def fixed_board_file(folder: Path, name: str, cores: int) -> Path:
    """The shipped board ``name`` as a file that fixes ``cores`` equal cores."""
    data = yaml.safe_load((BOARDS / f"{name}.yaml").read_text())
    path = folder / f"{name}-{cores}.yaml"
    path.write_text(yaml.safe_dump({**data, "name": f"{name}-{cores}", "cores": cores}))
    return path


@pytest.mark.slow  # three compiles of a small CNN: about a minute
def test_compile_keeps_the_fastest_cut_as_each_cut_compiles_alone(tmp_path):
    model = models.cnn_residual(batch=1, image=16)
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "chosen", random_samples=2)
    choice = result.design["placement"]["refinement"]["partition"]
    cuts = {cut["cores"]: cut for cut in choice["cuts"]}
    assert sorted(cuts) == partitions(load_board("zcu104"))
    alone = {}
    for count in cuts:  # the same model compiled on a board file that fixes the cut
        board = fixed_board_file(tmp_path, "zcu104", count)
        alone[count] = Design(model, board, profile_cpu=False).compile(tmp_path / f"cut{count}", random_samples=2)
        assert alone[count].design["interval_us"] == pytest.approx(cuts[count]["interval_us"], rel=1e-9)
    best = min(cut["interval_us"] for cut in cuts.values())
    fewest = min(count for count, cut in cuts.items() if cut["interval_us"] <= best * (1 + TIE))
    assert choice["cores"] == fewest and str(fewest) in choice["reason"]
    record = load(tmp_path / "chosen")
    assert record.board.cores == fewest
    assert len(project_board(record).cores) == fewest
    assert result.design["interval_us"] == pytest.approx(alone[fewest].design["interval_us"], rel=1e-9)
    assert simulate(tmp_path / "chosen", 8).fps > 0


def test_a_fixed_board_compiles_on_its_own_cores(tmp_path):
    result = Design(models.mlp(batch=1), "zcu104-dpu", profile_cpu=False).compile(tmp_path / "p", random_samples=2)
    assert "partition" not in result.design["placement"]["refinement"]
    assert load(tmp_path / "p").board.cores is None


def test_search_ranks_the_cuts_of_a_free_board():
    ranked = search(models.cnn_residual(batch=1), "zcu104", optimizer=(True,), time_limit=8, profile_cpu=False)
    cuts = {s.candidate.cores for s in ranked}
    assert cuts <= set(partitions(load_board("zcu104"))) and all(s.candidate.cut for s in ranked)
    for scored in ranked:
        assert len(scored.design.board.cores) == scored.candidate.cores
        assert "cut into" in scored.candidate.label()
    fixed = search(models.cnn_residual(batch=1), "zcu104-dpu", optimizer=(True,), time_limit=8, profile_cpu=False)
    assert not any(s.candidate.cut for s in fixed) and {s.candidate.cores for s in fixed} <= {1, 2}
