"""What a launch recipe is: one server configuration found in a test file or fixture."""
from __future__ import annotations

from pydantic import BaseModel, Field

from tools.source.origin import Origin


class Recipe(BaseModel):
    name: str = Field(description="path::Class (or path::function); [variant] for launch settings with a "
                                   "variant, #n when one body launches several servers")
    model: str | None = Field(description="Model id passed to the launcher; None when unresolved")
    flags: dict[str, str] = Field(description="Server flags as written; a switch is ''")
    flag_origins: dict[str, Origin] = Field(default_factory=dict, description="Where each flag's value was written")
    env: dict[str, str] = Field(default_factory=dict, description="Environment additions passed to the launcher")
    env_origins: dict[str, Origin] = Field(default_factory=dict, description="Where each env value was written")
    variant: str | None = Field(None, description="The launch settings' variant name, e.g. TP8+MTP")
    hardware: str | None = Field(None, description="CI suite / runner / folder hint, e.g. stage-c-test-4-gpu-h100")
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    origin: Origin = Field(description="The class (or function) that describes this server")
    launch: Origin = Field(description="The launcher call")
    unresolved: list[str] = Field(default_factory=list, description="Expressions we could not resolve statically")

    @property
    def speculative(self) -> bool:
        return any(f.startswith("--speculative-") for f in self.flags)
