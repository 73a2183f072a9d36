"""The HTML report of a project, read from the project folder and the simulators' results: ``page``
(the page and its context), ``figures`` (the model graph and the Gantt chart as inline SVG),
``sections`` (the tables) and ``units`` (numbers in users' units)."""
