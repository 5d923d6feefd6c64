"""Every sandbox the manager started: the runtime, starting, stopping, and why one ended.

A started container is recorded in :attr:`SandboxFleet.live` before the first checkpoint after
``runtime.start()`` returns, and leaves it only once the runtime stopped it, so the manager's
shutdown can always find and stop everything it started.
"""

from __future__ import annotations

import logging
import os
import secrets

import anyio
from anyio.abc import TaskGroup
from bridge_protocol import UnsupportedVersion

from bridge_core.channel import Channel
from bridge_core.errors import BridgeError, RuntimeUnavailable, SandboxStartError
from bridge_core.gateway import Gateway
from bridge_core.runtime.base import (
    CheckedRuntime,
    RuntimeBackend,
    RuntimeFactory,
    RuntimeSource,
    SandboxSpec,
)
from bridge_core.sessions._budget import CallLimits
from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions._session import format_bytes
from bridge_core.sessions.types import SessionConfig

__all__ = ["SandboxFleet"]

logger = logging.getLogger("bridge_core.sessions")

HANDSHAKE_TIMEOUT = 10.0
"""The sandbox client sends Hello right after connecting; 10 s covers a loaded 2-core host."""
STOP_TIMEOUT = 15.0
"""Bound on one stop/kill+remove through the runtime (podman stop with grace, then rm)."""
STOP_GRACE = 1.0
SHUTDOWN_TIMEOUT = 30.0
"""Bound on stopping everything when the manager closes (stops run concurrently)."""
EXIT_STATUS_WAIT = 3.0
"""The channel can end a moment before the runtime reports the container as exited."""
EXIT_STATUS_POLL = 0.05


class SandboxFleet:
    """Starts sandboxes through the runtime (resolved lazily) and stops them."""

    def __init__(
        self,
        config: SessionConfig,
        runtime: RuntimeSource,
        gateway: Gateway,
    ) -> None:
        self.config = config
        self.image_id: str | None = None
        """The configured image's ID as checked in the runtime's store (a
        :class:`CheckedRuntime`): sandboxes start from it. None: by the image's name."""
        self.runtime: RuntimeBackend | None = None
        self._factory: RuntimeFactory | None = None
        if isinstance(runtime, CheckedRuntime):
            self.runtime, self.image_id = runtime.backend, runtime.image_id
        elif isinstance(runtime, RuntimeBackend):
            self.runtime = runtime
        else:
            self._factory = runtime
        self.owns_runtime = False
        """True when the runtime came from the factory: the fleet closes it."""
        self._gateway = gateway
        self._runtime_lock = anyio.Lock()
        self._leftovers_checked = False
        self._prefix = f"mcp-sandbox-{os.getpid()}-{secrets.token_hex(3)}"
        self.started = 0
        self.live: set[LiveSandbox] = set()
        self.memory_limit = format_bytes(config.limits.memory_bytes)
        self.closed = False
        self._tg: TaskGroup | None = None

    def open(self, task_group: TaskGroup) -> None:
        self._tg = task_group

    async def get_runtime(self) -> RuntimeBackend:
        """The runtime, made by the factory on first need (failures are not cached)."""
        async with self._runtime_lock:
            if self.runtime is None:
                assert self._factory is not None
                try:
                    made = await self._factory()
                except BridgeError:
                    raise
                except Exception as exc:
                    # A factory is foreign code: whatever it raises means "no runtime yet".
                    logger.exception("the container runtime could not be set up")
                    raise RuntimeUnavailable(
                        f"the container runtime could not be set up: {exc}"
                    ) from exc
                if isinstance(made, CheckedRuntime):
                    self.runtime, self.image_id = made.backend, made.image_id
                else:
                    self.runtime = made
                self.owns_runtime = True
            if not self._leftovers_checked and self._tg is not None:
                # Containers a killed bridge left behind go on our first use of the runtime.
                self._leftovers_checked = True
                self._tg.start_soon(self._remove_leftovers, self.runtime)
            return self.runtime

    async def _remove_leftovers(self, runtime: RuntimeBackend) -> None:
        try:
            removed = await runtime.remove_leftovers()
        except Exception:
            logger.exception("removing leftover sandboxes of a previous bridge failed")
            return
        if removed:
            logger.info("removed %d leftover sandbox(es) of a bridge that is gone", removed)

    async def start(self, preimport: tuple[str, ...] = ()) -> LiveSandbox:
        """Start, connect and handshake one sandbox (called from the manager's task group);
        it imports ``preimport`` (module names) as it starts.

        Raises :class:`~bridge_core.errors.BridgeError` (RuntimeUnavailable, SandboxStartError)
        and nothing else.
        """
        runtime = await self.get_runtime()
        self.started += 1
        spec = SandboxSpec(
            name=f"{self._prefix}-{self.started}",
            image=self.config.image,
            image_id=self.image_id,
            limits=self.config.limits,
            security_opt=self.config.security_opt,
            connect_timeout=self.config.start_timeout,
            preimport=preimport,
        )
        try:
            # The runtime bounds its own wait for the channel; this bounds everything else too.
            with anyio.fail_after(self.config.start_timeout + STOP_TIMEOUT):
                sandbox = await runtime.start(spec)
        except BridgeError:
            raise
        except TimeoutError:
            raise SandboxStartError(
                f"sandbox {spec.name} did not start within {self.config.start_timeout:g} s"
            ) from None
        except Exception as exc:
            logger.exception("runtime %s failed to start sandbox %s", runtime.name, spec.name)
            raise SandboxStartError(f"sandbox {spec.name} could not be started: {exc}") from exc
        # No checkpoint between start() returning and this line: shutdown will see it.
        live = LiveSandbox(
            sandbox,
            Channel(sandbox.stream),
            self._gateway,
            handshake_timeout=HANDSHAKE_TIMEOUT,
            call_limits=CallLimits(self.config.max_calls_in_flight, self.config.max_call_bytes),
        )
        self.live.add(live)
        assert self._tg is not None
        try:
            await self._tg.start(live.serve)
        except UnsupportedVersion as exc:
            # An upgrade of the server or of the image alone: say which is older and what to do.
            self.discard(live, kill=True)
            advice = self.config.image_advice or "rebuild or pull the image of this bridge"
            raise SandboxStartError(
                f"sandbox image {spec.image!r} does not match this bridge: {exc}; {advice}"
            ) from exc
        except Exception as exc:  # TimeoutError, ProtocolError, ChannelClosed, or a runtime's own
            self.discard(live, kill=True)
            detail = "timed out" if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
            raise SandboxStartError(
                f"sandbox {spec.name} failed the protocol handshake ({detail}): "
                "is the image's sandbox client the same version as the bridge?"
            ) from exc
        return live

    def discard(self, live: LiveSandbox, *, kill: bool = False) -> None:
        """Stop reading ``live`` and stop (or kill) its container in the background."""
        live.close()
        if live in self.live and not self.closed and self._tg is not None:
            self._tg.start_soon(self.stop, live, kill)

    async def stop(self, live: LiveSandbox, kill: bool = False) -> None:
        """Stop and remove ``live``'s container: shielded and bounded, never raises."""
        runtime = self.runtime
        if runtime is None:
            self.live.discard(live)
            return
        with anyio.CancelScope(shield=True):
            try:
                with anyio.fail_after(STOP_TIMEOUT):
                    if kill:
                        await runtime.kill(live.sandbox)
                    else:
                        await runtime.stop(live.sandbox, grace=STOP_GRACE)
                self.live.discard(live)
            except Exception as exc:
                logger.warning("stopping sandbox %s failed (%r); killing it", live.name, exc)
                try:
                    with anyio.fail_after(STOP_TIMEOUT):
                        await runtime.kill(live.sandbox)
                    self.live.discard(live)
                except Exception:
                    logger.exception("could not kill sandbox %s", live.name)

    async def stop_all(self) -> None:
        """Kill every sandbox still recorded, all at once; then close a runtime we made.

        Killed, not stopped gracefully, and in bulk (:meth:`RuntimeBackend.kill_all`): nothing
        in a sandbox survives shutdown anyway, and MCP clients give a server about 2 s after
        closing its stdin before SIGTERM and 2 s more before SIGKILL, whatever the number of
        sessions it holds.
        """
        self.closed = True
        with anyio.CancelScope(shield=True):
            doomed = list(self.live)
            for live in doomed:
                live.close()
            runtime = self.runtime
            if runtime is not None and doomed:
                began = anyio.current_time()
                try:
                    with anyio.fail_after(SHUTDOWN_TIMEOUT):
                        await runtime.kill_all([live.sandbox for live in doomed])
                    self.live.difference_update(doomed)
                    logger.info(
                        "killed %d sandbox(es) in %.2f s",
                        len(doomed),
                        anyio.current_time() - began,
                    )
                except Exception:
                    logger.exception(
                        "could not kill sandboxes %s within %g s",
                        sorted(live.name for live in doomed),
                        SHUTDOWN_TIMEOUT,
                    )
            if self.owns_runtime and runtime is not None:
                with anyio.move_on_after(STOP_TIMEOUT):
                    await runtime.aclose()

    async def exit_reason(self, live: LiveSandbox) -> str:
        """Why ``live`` ended: a protocol violation, or what the runtime says about the
        container (``memory limit 512m exceeded``, ``container exited with status 137``)."""
        runtime = self.runtime
        if live.protocol_failure or runtime is None:
            return live.failure_reason
        try:
            with anyio.fail_after(EXIT_STATUS_WAIT):
                while True:
                    state = await runtime.status(live.sandbox)
                    if not state.running:
                        return state.describe(self.memory_limit)
                    await anyio.sleep(EXIT_STATUS_POLL)
        except TimeoutError:
            return live.failure_reason
        except Exception as exc:
            logger.warning("could not read the exit status of sandbox %s: %r", live.name, exc)
            return live.failure_reason
