"""Running a project elsewhere: ``pynq`` (flash over SSH, the driver's self-test) and ``cluster``
(a split as a pipeline of Ray actors)."""
