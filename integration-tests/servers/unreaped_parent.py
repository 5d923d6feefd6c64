"""``python unreaped_parent.py COMMAND [ARGS...]``: run COMMAND as a child this process never reaps.

For the no-orphans battery. A bridge that dies is normally reaped at once, and from then on any
other bridge on the host (a concurrent test run) sees its containers as leftovers and removes
them: a test could not tell whether the sandboxes ended by themselves. An exited but unreaped
process keeps its pid and start time in ``/proc``, so its containers still count as owned.

This process stands in for the bridge towards the MCP client: the client's pipes and process
group are the child's (its own copies are closed), it ignores SIGTERM (the child gets the
client's SIGTERM itself), and it exits as soon as the child has, with the child's status, but
without reaping it (``waitid`` with ``WNOWAIT``). The test that started it is a child
subreaper: the zombie passes to the test, which reaps it when it has looked at the containers.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # an ignored signal stays ignored on exec
        os.execvp(sys.argv[1], sys.argv[1:])
    os.close(0)
    os.close(1)
    ended = os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)
    assert ended is not None
    killed = ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
    os._exit(128 + ended.si_status if killed else ended.si_status)


if __name__ == "__main__":
    main()
