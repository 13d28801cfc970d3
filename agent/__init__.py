"""dsv4-agent orchestration: CLI, settings, run folder, trace, graph, planner, report."""
