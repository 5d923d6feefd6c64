"""Workflows: functions sandbox code saved to reuse, kept per principal in the state dir.

:class:`WorkflowStore` keeps them on disk (private, bounded, atomic);
:class:`WorkflowService` answers the sandbox's workflow requests for the caller's principal
(the gateway routes :data:`bridge_core.gateway.WORKFLOW_METHODS` to it);
:func:`export_workflows` and :func:`import_workflows` move them to and from reviewable ``.py``
files. A workflow's source is only ever parsed with :mod:`ast` on the host: it runs only inside
a sandbox.
"""

from bridge_core.workflows._files import ImportOutcome, export_workflows, import_workflows
from bridge_core.workflows._limits import WorkflowLimits, validate_name
from bridge_core.workflows._service import Check, WorkflowService
from bridge_core.workflows._source import FunctionFacts, WorkflowError, read_function
from bridge_core.workflows._store import Saved, WorkflowStore, WorkflowVersion

__all__ = [
    "Check",
    "FunctionFacts",
    "ImportOutcome",
    "Saved",
    "WorkflowError",
    "WorkflowLimits",
    "WorkflowService",
    "WorkflowStore",
    "WorkflowVersion",
    "export_workflows",
    "import_workflows",
    "read_function",
    "validate_name",
]
