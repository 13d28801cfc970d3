"""Campaign steps: the adapters between the graph's lanes and the tools.

Each step kind maps to a module here exposing ``run(ctx: StepContext, step: PlanStep) ->
StepOutcome``. A kind whose module is missing reports ``not_available`` (no fake results).
"""
