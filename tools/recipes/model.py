"""What a launch recipe is: one server configuration found in a test file or fixture."""
from __future__ import annotations

from pydantic import BaseModel, Field

from tools.source.origin import Origin


def model_name(model: str) -> str:
    """A model id's name without its organisation or path: ``deepseek-ai/DeepSeek-V4-Flash/`` -> ``DeepSeek-V4-Flash``."""
    return model.rstrip("/").split("/")[-1]


def same_model(a: str | None, b: str | None) -> bool:
    """The one "same model" rule: the same name, whatever the organisation, path or letter case
    (a recipe for ``deepseek-ai/DeepSeek-V4-Flash`` holds for ``/models/DeepSeek-V4-Flash``)."""
    return bool(a) and bool(b) and model_name(a).lower() == model_name(b).lower()


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
    unread_flags: dict[str, str] = Field(default_factory=dict, description=(
        "Flags whose value could not be resolved statically (flag -> the expression as written); never in flags"))
    unread_env: dict[str, str] = Field(default_factory=dict, description=(
        "Environment variables whose value could not be resolved statically (name -> the expression); never in env"))
    needs: dict[str, str] = Field(default_factory=dict, description=(
        "Flags the test takes from an environment variable with no default (flag -> variable): inputs the user "
        "must give, never in flags"))
    needs_origins: dict[str, Origin] = Field(default_factory=dict, description="Where each needed variable is read")
    condition: str | None = Field(None, description=(
        "The hardware condition this variant of the launch is for, as written (\"is_blackwell()\", "
        "\"not is_blackwell()\"): the test chooses a value on the GPU it runs on"))

    @property
    def speculative(self) -> bool:
        return any(f.startswith("--speculative-") for f in self.flags)
