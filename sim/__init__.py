"""The cocotb testbenches of the generated RTL (``fpgaplace.testbenches``): loaded by cocotb in the
simulator's process or copied into a project, never imported by the package itself."""
