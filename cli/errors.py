"""What stops a command."""

from __future__ import annotations


class CommandError(Exception):
    """Printed as ``error: <message>``; the command exits with ``status``."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
