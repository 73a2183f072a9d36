"""One module per command (``boards`` holds ``boards`` and ``board``, ``place`` holds ``place`` and
``evaluate``): plain functions, their typer parameters in their signatures, registered by
``fpgaplace.cli.app``. They import ``fpgaplace.cli.options`` and ``fpgaplace.cli.output`` and the
library below them (heavy modules inside the function bodies, for start-up time), never the app.
"""
