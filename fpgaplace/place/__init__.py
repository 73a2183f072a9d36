"""Placement: ``cost/`` (what each op costs on each device kind, as a ``PlacementProblem``),
``solvers/`` (the DP, the integer programs, the baselines, the trusted evaluator) and ``workload``
(the paper's workload and split files)."""
