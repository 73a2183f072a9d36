"""The ``fpgaplace`` command line: ``app`` (the typer app and ``main``, the console script),
``options`` (the flags commands share, declared once), ``output`` (consoles, ``--json``, the
one-line error mapping, shared printers) and ``commands/`` (one module per command)."""
