"""What a constraint is: one rule read from SGLang's argument hooks, with its scope and its condition."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.constraints.condition import Binding
from tools.source.origin import Origin

RuleKind = Literal["allowed_algorithms", "requires", "forbids", "alias", "draft_path_fallback",
                   "auto_default", "all_or_none", "topk1_draft_tokens", "default"]


class Rule(BaseModel):
    kind: RuleKind
    rule: str = Field(description="The rule in words, with its scope")
    architectures: list[str] | None = Field(None, description="None = every architecture")
    algorithms: list[str] | None = Field(None, description="None = every algorithm")
    excluded_architectures: list[str] = Field(default_factory=list, description="Not for these (else branches)")
    excluded_algorithms: list[str] = Field(default_factory=list, description="Not for these (else / early return)")
    field: str | None = None
    values: list[str] = Field(default_factory=list, description="Allowed values / alias target / defaults")
    condition: str | None = Field(None, description="Other conditions, as written (the tests joined with 'and')")
    tests: list[str] = Field(default_factory=list, description="The other conditions one by one, as written; "
                                                               "the rule applies only where all of them hold")
    bindings: dict[str, list[Binding]] = Field(default_factory=dict, description=(
        "Local names the tests use, with the assignments before the rule that give them their value"))
    gate: str | None = Field(None, description=(
        "The condition under which the hooks call the function holding the rule (every call site guarded); "
        "the rule is left out where the gate is known to be false"))
    trigger: str | None = Field(None, description="For checks: the expression under which SGLang rejects "
                                                  "the settings (an assert's negation, a raise's test)")
    literal: bool = Field(False, description="values are constants from the source (checkable), not expressions")
    function: str
    origin: Origin
    stage: int | None = Field(None, description=(
        "Its place in SGLang's resolution order (the pipeline's steps, in the order they run); None when the tree "
        "has no pipeline the rule's function is reached from"))
    stage_step: str | None = Field(None, description="The pipeline step that reaches the rule's function")
    stage_origin: Origin | None = Field(None, description="Where the pipeline runs that step")

    def applies(self, architecture: str | None, algorithm: str | None) -> bool:
        """Whether the architecture/algorithm scope covers this configuration (conditions aside)."""
        arch_ok = self.architectures is None or (architecture is not None and architecture in self.architectures)
        arch_ok = arch_ok and architecture not in self.excluded_architectures
        algo_ok = self.algorithms is None or algorithm is None or algorithm in self.algorithms
        algo_ok = algo_ok and (algorithm is None or algorithm not in self.excluded_algorithms)
        return arch_ok and algo_ok

    def needs_architecture(self) -> bool:
        return self.architectures is not None or bool(self.excluded_architectures)
