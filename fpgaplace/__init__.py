"""fpgaplace: place a DNN's operators on a multicore FPGA board and build the project that runs it."""

__version__ = "0.1.0"
