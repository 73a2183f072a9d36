"""The project folder as data, read and written by every later stage: ``layout`` (every file and
folder name), ``record`` (the typed, checked ``design.json``), ``manifest`` (the split's pieces),
``arrays`` (a core's ``layers.npz``), ``board`` (the board a project names)."""
