"""doctor's report: one line per finding, escaped and with the servers' secrets masked."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TextIO

from bridge_core.redaction import Redactor
from bridge_core.sessions import visible

__all__ = ["Report"]


@dataclass
class Report:
    """The findings, one line each. Details quote text from upstream servers, config files and
    the runtime (an error, a server name, pull progress): every line has its control, bidi and
    line-separator characters escaped, so none can clear the terminal or fake a finding."""

    out: TextIO
    failed: bool = False
    redactor: Redactor = dataclasses.field(default_factory=Redactor)
    """The servers' secrets, once discovered: an upstream's error may quote its own token."""

    def _print(self, line: str, *, flush: bool = False) -> None:
        print(visible(self.redactor.text(line), single_line=True), file=self.out, flush=flush)

    def progress(self, line: str) -> None:
        self._print(f"       {line[:300]}", flush=True)

    def ok(self, what: str, detail: str) -> None:
        self._print(f"[ok]   {what}: {detail}")

    def warn(self, what: str, detail: str, fix: str = "") -> None:
        self._print(f"[warn] {what}: {detail}")
        if fix:
            self._print(f"       fix: {fix}")

    def fail(self, what: str, detail: str, fix: str) -> None:
        self.failed = True
        self._print(f"[FAIL] {what}: {detail}")
        self._print(f"       fix: {fix}")
