"""ONNX -> ``OpGraph``, one step a module: ``load`` (the steps in order: ``load_onnx``, ``from_model``),
``checks``, ``bind`` (input shapes and batch), ``shapes`` (shape inference and resolution), ``build``
(the graph, MACs and QONNX widths)."""
