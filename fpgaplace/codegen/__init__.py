"""Code generation: a placed int8 design and its folded cores -> a buildable project folder.

``project.write_project`` writes it (HLS per core, the split, build scripts, the driver, the RTL
and ``design.json``); ``fpgaplace.flow.compile`` decides what it writes, and
``fpgaplace.project.record`` reads it back.
"""
