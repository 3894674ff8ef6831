"""At interpreter exit the one exit hook stops the runtime still running, closing its HTTP session, after
updates in place (``pre_update``, then the new code imported) have retired and dropped the old ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.servers import RunningServer

from .conftest import cli_env

UPDATES = 3
AT_EXIT = """
import atexit, gc, importlib, sys, weakref
retired = []
for update in range(int(sys.argv[2]) + 1):
    if update:
        importlib.import_module("a0_reranker.a0_hooks.lifecycle").pre_update()  # drops our modules
    runtime = importlib.import_module("a0_reranker.service.runtime")
    config = importlib.import_module("a0_reranker.core.config").RerankerConfig(endpoint=sys.argv[1], timeout=10)
    assert runtime.rerank("backup key", ["lunch menu", "backup key"], config=config) is not None
    retired.append(weakref.ref(runtime.running()))
current = retired.pop()()
sessions = list(current.service._transport._sessions.values())
del runtime
gc.collect()
print("retired alive:", sum(ref() is not None for ref in retired))
atexit._run_exitfuncs()
print("current stopped:", not current.owner.alive, "sessions closed:", bool(sessions) and all(s.closed for s in sessions))
"""


def test_exit_stops_the_current_runtime_and_no_retired_one_is_kept(package_path: Path, infinity: RunningServer
                                                                    ) -> None:
    result = subprocess.run([sys.executable, "-c", AT_EXIT, infinity.url, str(UPDATES)], env=cli_env(package_path),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["retired alive: 0", "current stopped: True sessions closed: True"]
    assert "Unclosed" not in result.stderr, result.stderr
