"""The bottom layer, importing nothing of fpgaplace but itself: DAG algorithms (``graphs``), the one
atomic writer (``files``), onnxruntime sessions and runs (``onnxrt``), tensor comparison (``compare``),
the one Jinja2 environment (``templates``) and the error type (``errors``)."""
