"""The worker supervisor on real child processes: a child that exits is started again after a back-off,
one that keeps exiting at once stops the supervisor with exit 1 (the others stopped with it), and a child
that ignores SIGTERM is killed after the stop timeout. (tests/workers/test_queue_separation.py runs it
with real Celery workers: a killed collect worker restarted, SIGTERM stopping them all.)"""

from __future__ import annotations

import re
import sys

from backend.cli.supervise import Child, supervise
from tests.support.procs import pid_alive


def test_a_child_that_keeps_exiting_stops_the_supervisor_and_its_siblings():
    lines: list[str] = []
    steady = Child("steady", [sys.executable, "-c", "import time; time.sleep(600)"])
    # ignores SIGTERM: only the SIGKILL after the stop timeout ends it
    stubborn = Child("stubborn", [sys.executable, "-c", ("import signal, time; "
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)")])
    failing = Child("failing", [sys.executable, "-c", "import sys; sys.exit(3)"])
    code = supervise([steady, stubborn, failing], stop_timeout=0.5, echo=lines.append, restart_min=0.05,
                     restart_max=0.2, stable_after=60, max_quick_exits=4)
    assert code == 1
    assert len(failing.history) == 4 and failing.restarts == 3  # started, then restarted three times
    assert [len(steady.history), len(stubborn.history)] == [1, 1]  # the others never restarted
    assert not any(pid_alive(p) for c in (steady, stubborn, failing) for p in c.history)
    assert steady.popen.returncode == -15 and stubborn.popen.returncode == -9  # SIGTERM; SIGKILL after 0.5 s
    text = "\n".join(lines)
    assert text.count("exited with 3 after") == 3 and text.count("restarted failing") == 3
    assert re.findall(r"restarting in ([\d.]+) s", text) == ["0.05", "0.1", "0.2"]  # doubling, capped
    assert "failing exited with 3 4 times in a row" in text
    assert "stubborn did not stop within 0.5 s: killing it" in text
