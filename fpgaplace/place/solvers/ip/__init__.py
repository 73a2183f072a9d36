"""Integer programs for placement on SCIP (pyscipopt), after Tarnawski et al., "Efficient Algorithms
for Device Placement of DNN Graph Operators" (NeurIPS 2020, Sections 4-5 and Appendix), in our own
formulation. One job per module, imported from where it lives:

``reduce``      the contraction of the problem before a program is built (groups of nodes that
                always share a device, transfer terms) and the projection of a start onto the groups.
``scip``        SCIP plumbing both programs share: a configured model, progress events, status
                names, symmetry breaking of identical devices, warm starts and the kept start.
``throughput``  the max-load program (``solve_throughput_ip``), contiguous (chains of ideals) or not.
``latency``     the single-sample latency program (``solve_latency_ip``) with q subgraphs per accelerator.

Solving either is NP-hard in general; SCIP branch-and-bound runs with a time and gap limit.
"""
