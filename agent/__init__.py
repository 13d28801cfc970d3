"""dsv4-agent orchestration: CLI, settings, run folder, trace, graph, planner, report."""

__version__ = "0.1.0"  # the package's version (pyproject.toml reads it from here)
