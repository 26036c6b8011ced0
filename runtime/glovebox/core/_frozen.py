"""The one base class of glovebox's configuration models: frozen, no extra fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """A pydantic model that cannot be changed after validation and refuses unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")
