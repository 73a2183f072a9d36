"""A placement as hardware around the cores: ``plan`` (the FIFOs, DMAs and broadcasters of each
node, from the project record), ``vivado`` (Zynq block designs), ``vitis`` (Alveo links) and
``write`` (the scripts and the Makefile)."""
