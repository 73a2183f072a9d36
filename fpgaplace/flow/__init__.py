"""The flow: ``design`` (``Design``, the stages strung together for the CLI and Python users),
``compile`` (the compile step's decisions), ``refine`` (the placement <-> folding loop), ``settle``
(free ops next to what they read, so every cut is one a core builds), ``split``
(one ONNX per device piece) and ``search`` (the automatic search). Only this layer and the CLI
know ``Design``."""
