"""Campaign steps: the adapters between the graph's lanes and the tools.

Each step kind is a module here exposing ``run(ctx: StepContext, step: PlanStep) -> StepOutcome``,
listed in the step table (``agent/steps/step_table.py``) with its lane and graph node.
"""
