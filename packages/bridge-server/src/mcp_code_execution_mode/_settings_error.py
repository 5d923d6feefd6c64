"""The one error of settings: a bad variable, flag or settings-file key."""

from __future__ import annotations

__all__ = ["SettingsError"]


class SettingsError(ValueError):
    """A setting has a bad value; the message is one line naming the variable, flag or key."""

    def __init__(
        self, message: str, *, names: tuple[str, ...] = (), place: str | None = None
    ) -> None:
        super().__init__(message)
        self.names = names
        """The variables, flags or file keys at fault, as the user wrote them."""
        self.place = place
        """For a settings-file key: ``FILE:LINE`` (or ``FILE`` when the line is unknown)."""

    @property
    def fix(self) -> str:
        """Where to correct it, for a user who sees the error in their MCP client."""
        if self.place is not None:
            what = " and ".join(self.names) if self.names else "the file"
            return f"correct {what} in {self.place}, then restart the server"
        flags = [n for n in self.names if n.startswith("--")]
        variables = [n for n in self.names if not n.startswith("--")]
        places = []
        if variables:
            places.append(
                f'correct or remove {" and ".join(variables)} in the "env" of this server\'s '
                "entry in your MCP client's configuration (or wherever its environment sets it)"
            )
        if flags:
            places.append(f'correct {" and ".join(flags)} in the "args" of that entry')
        return "; ".join(places or ["correct the setting"]) + ", then restart the server"
