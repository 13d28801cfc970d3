"""Small shared types of the evidence engine: a citation into the SGLang source."""
from __future__ import annotations

from pydantic import BaseModel, Field


class Origin(BaseModel):
    path: str = Field(description="Relative to the SGLang source root")
    line: int = Field(description="1-based line")

    def cite(self) -> str:
        return f"{self.path}:{self.line}"
