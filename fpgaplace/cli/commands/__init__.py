"""Commands kept in modules of their own (one per stage: ``flash``, ``report``, ...).

Each module imports ``fpgaplace.cli.app.app`` and its helpers and adds its commands with
``@app.command()``; ``fpgaplace.cli.app`` imports every module of this package once, at the end.
"""
