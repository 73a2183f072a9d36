"""The simulators, each reading a project folder only: ``csim`` (g++ C simulation, bit-exact per
core), ``event`` (the pipeline's event simulation), ``rtl`` and ``rtl_project`` (cocotb on Icarus or
Verilator), ``yosys`` (DSP counts beside the estimate). The testbenches live in the repository's
``sim/`` (``fpgaplace.testbenches``)."""
