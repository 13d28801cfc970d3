"""What the user asked for: the settings table (``model``: every setting once, with its default, help and
flag), where values come from (``layers``: options > DSV4_* environment > config file > defaults), the
config file (``config_file``), a recorded run's settings rebuilt once (``of_run``) and what a run folder
may give back (``recorded``)."""
