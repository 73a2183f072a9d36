"""The HTML report of a project (``page``): read from the project folder and the simulators' results."""
