"""The one Jinja2 environment over the shipped templates (``fpgaplace.hls_templates``): the code
generator renders C++, Verilog, TCL and the driver with it, the report its HTML page (escaped).
One environment per kind and process, so each template is compiled once (a template whose file
changed is reloaded); a name a template uses but is not given is an error, never an empty string.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from pathlib import Path

import jinja2

TEMPLATE_PACKAGE = "fpgaplace.hls_templates"


def template_dir() -> Path:
    """The folder of the shipped templates."""
    return Path(str(files(TEMPLATE_PACKAGE)))


@functools.cache
def environment(html: bool = False) -> jinja2.Environment:
    """Source text keeps its trailing newline; ``html`` escapes every value (the report)."""
    loader = jinja2.FileSystemLoader(str(template_dir()))
    if html:
        return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, autoescape=True)
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
