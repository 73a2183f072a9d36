"""The model layer: ``ir`` (``OpGraph``), ``ops`` (the op registry), ``macs`` and ``proxies`` (its MAC
rules and contrib shape proxies), ``qdq`` (what a QDQ model is), ``frontend/`` (ONNX -> ``OpGraph``),
``passes/`` (the graph optimizer), ``quantize`` (int8 QDQ) and ``zoo`` (built-in models)."""
