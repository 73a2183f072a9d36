"""The fuzz generator's cases through the CLI, in-process: no traceback, no hang, a non-zero exit
with one error line naming the file or flag on invalid input, exit 0 on valid input."""

from __future__ import annotations

import collections
import time

import fuzz
import pytest

SEED = 0


@pytest.fixture(scope="module")
def cases() -> list[fuzz.Case]:
    return fuzz.generate(SEED)


def test_the_generator_is_seeded_and_covers_every_family(cases):
    assert len(cases) >= 300
    counts = collections.Counter(case.family for case in cases)
    assert set(counts) == set(fuzz.FAMILIES) and min(counts.values()) >= 50
    assert [(c.name, c.argv, c.files) for c in fuzz.generate(SEED)] == [(c.name, c.argv, c.files) for c in cases]
    assert [c.files for c in fuzz.generate(SEED + 1)] != [c.files for c in cases]
    assert sum(c.valid is True for c in cases) >= 30 and sum(c.valid is False for c in cases) >= 200


def test_every_fuzz_case_fails_cleanly_or_succeeds(cases):
    cases = [case for case in cases if case.family != "project"]  # the project family: the next test
    start = time.perf_counter()
    failures = [outcome for outcome in (fuzz.run_case(case, timeout=30) for case in cases) if not outcome.ok]
    report = "\n".join(f"{o.case.name}: {'; '.join(o.problems)} | {o.stderr.strip()[-300:]}" for o in failures[:20])
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n{report}"
    assert time.perf_counter() - start < 300  # about 60 s on an idle 2-core machine


def test_a_damaged_project_is_one_error_line_in_every_command_that_reads_it(cases):
    """At least 200 seeded mutations of a compiled project's design.json and some missing, truncated
    and swapped project files through csim, sim, report and flash: no traceback, no hang, and no
    exit 0 on a value the record's rules forbid (the error then names design.json and the field)."""
    cases = [case for case in cases if case.family == "project"]
    kinds = collections.Counter(case.name.split("/")[1] for case in cases)
    assert kinds["json"] >= 200 and min(kinds["missing"], kinds["truncated"], kinds["swapped"]) >= 10
    assert sum(case.valid is False for case in cases) >= 150
    assert {case.argv[0] for case in cases} == {"csim", "sim", "report", "flash"}
    start = time.perf_counter()
    failures = [outcome for outcome in (fuzz.run_case(case, timeout=30) for case in cases) if not outcome.ok]
    report = "\n".join(f"{o.case.name}: {'; '.join(o.problems)} | {o.stderr.strip()[-300:]}" for o in failures[:20])
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n{report}"
    assert time.perf_counter() - start < 240  # about 40 s on an idle 2-core machine


def test_the_judge_catches_what_it_should(tmp_path):
    """The checks themselves can fail: exit 0 on invalid input, a missing file name, a traceback."""
    invalid = fuzz.Case("cli", "x", ("inspect", "{dir}/m.onnx"), valid=False, mentions=("{dir}/m.onnx",))
    outcome = fuzz.judge(invalid, tmp_path, 0, "", fuzz.Outcome(invalid, 0, 0.0))
    assert outcome.problems == ["exit 0 on invalid input"]
    outcome = fuzz.judge(invalid, tmp_path, 1, "error: something else\n", fuzz.Outcome(invalid, 1, 0.0))
    assert outcome.problems and "does not name" in outcome.problems[0]
    outcome = fuzz.judge(invalid, tmp_path, 1, "Traceback (most recent call last):\nerror: x\n",
                         fuzz.Outcome(invalid, 1, 0.0))
    assert "traceback" in outcome.problems


def test_the_scale_family_judges_overruns_and_invalid_placements(tmp_path):
    """The scale family's cases carry their time limit; the judge counts a run past
    limit x 1.1 + 5 s as an overrun and an exit 0 whose placement the evaluator rejects (here a
    sized op on an FPGA with no memory) as an accepted invalid placement."""
    import json
    import random

    cases = fuzz.scale_cases(random.Random("0-scale"))
    assert len(cases) >= 25 and all(case.time_limit for case in cases)
    assert {"chain-20k", "chain-200k", "dense-dag-2k", "zero-memory-dag-500"} <= {c.name.split("/")[1] for c in cases}
    case = next(c for c in cases if c.name.startswith("scale/zero-memory-dag-500/throughput-auto"))
    workload = fuzz.large_workload(random.Random(3), 6, memory_share=0.0)
    (tmp_path / "workload.json").write_text(json.dumps(workload))
    sized = next(node["id"] for node in workload["nodes"] if node["size"] > 0)
    rest = [node["id"] for node in workload["nodes"] if node["id"] != sized]
    (tmp_path / fuzz.PLACEMENT).write_text(json.dumps({"fpgas": [{"nodes": [sized]}], "cpus": [{"nodes": rest}]}))
    slow = fuzz.Outcome(case, 0, case.time_limit * fuzz.OVERRUN_FACTOR + fuzz.STARTUP_SECONDS + 0.1)
    outcome = fuzz.judge(case, tmp_path, 0, "", slow)
    assert outcome.overran and outcome.accepted_invalid
    assert any(p.startswith("overran") for p in outcome.problems)
    assert any(p.startswith("accepted an invalid placement") for p in outcome.problems)
