"""Every command stops on a signal at once, with the documented exit code and its one line: no
traceback, no leak warning, no hang, and nothing it started left running (issue 23, item 9).

Signals go to the command's whole process group, as ``timeout`` and a terminal's Ctrl-C send them
(the benchmark's server processes get them too). Each test waits until the command is busy (a request
held at a loopback server's gate, or the benchmark's first progress step) before it signals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.processes import ended, members_of_group
from support.servers import RunningServer, serve_in_thread

from .conftest import BENCH_MODULE, BENCH_PROG, cli_env

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open") or not Path("/proc/self/stat").exists(),
                                reason="watches the command's processes through /proc and pidfds (Linux)")

EXIT_WITHIN_S = 30.0  # generous for a loaded 2-core machine; a hang would take forever
NOT_ON_STDERR = ("Traceback", "Unclosed", "Warning", "leaked", "Exception ignored")
BENCH_MODES = {  # the developers' benchmark program, python -m a0_reranker.bench
    "bench": ["--concurrency", "1", "--documents", "4", "--recalls", "1000000"],
    "bench --replicas": ["--replicas", "2", "--quick", "--recalls", "1000000"],
    "bench --overload": ["--overload", "--quick", "--seconds", "3600"],
    "bench --burst": ["--burst", "--replicas", "2", "--quick"],
}


class Command:
    """A command started in a process group of its own, as a terminal or ``timeout`` starts it."""

    def __init__(self, package_path: Path, args: list[str], module: str = "a0_reranker") -> None:
        self.process = subprocess.Popen([sys.executable, "-m", module, *args], env=cli_env(package_path),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True)
        self.stderr_lines: list[str] = []
        self.pidfds: list[int] = []

    def signal_group(self, signum: int) -> None:
        os.killpg(self.process.pid, signum)

    def read_stderr_until(self, text: str) -> str:
        """Lines of stderr until one contains ``text`` (the command is then at that point)."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line.rstrip("\n"))
            if text in line:
                return line
        raise AssertionError(f"the command ended before printing {text!r}: {self.stderr_lines}")

    def watch_group(self) -> None:
        """Keep a pidfd on every process the command started (its process group), to see them end."""
        self.pidfds += _pidfds([pid for pid in members_of_group(self.process.pid) if pid != self.process.pid])

    def finish(self) -> tuple[int, str, str]:
        """Wait for the exit (bounded): its code, stdout, and all of stderr."""
        stdout, rest = self.process.communicate(timeout=EXIT_WITHIN_S)
        return self.process.returncode, stdout, "\n".join([*self.stderr_lines, *rest.splitlines()])

    def group_ended(self) -> bool:
        """Whether everything the command started has ended: those watched, and any its group still holds."""
        self.watch_group()
        return ended(self.pidfds, within_s=EXIT_WITHIN_S)

    def stop(self) -> None:
        """On a failure, leave nothing behind."""
        for fd in self.pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.communicate()


@pytest.fixture
def start(package_path: Path) -> Iterator[Callable[..., Command]]:
    started: list[Command] = []

    def run(*args: str, module: str = "a0_reranker") -> Command:
        started.append(Command(package_path, list(args), module))
        return started[-1]

    yield run
    for command in started:
        command.stop()


@pytest.fixture
def held_server() -> Iterator[RunningServer]:
    """An Infinity stand-in that holds every request until the test ends."""
    with serve_in_thread("infinity") as server:
        server.gate.hold()
        yield server


def _pidfds(pids: list[int]) -> list[int]:
    """A pidfd for each process still there (a pidfd names that process, never a reused id)."""
    found = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            found.append(os.pidfd_open(pid))
    return found


def assert_clean(stderr: str, stop_line: str) -> None:
    assert not [word for word in NOT_ON_STDERR if word in stderr], stderr
    assert stderr.splitlines().count(stop_line) == 1, stderr
    assert stderr.splitlines()[-1] == stop_line, stderr


def server_command(name: str, url: str) -> list[str]:
    """The command's arguments, aimed at the held server: it waits on its first request there."""
    return {"probe": ["probe", url, "--timeout", "600"],
            "rerank": ["rerank", "--endpoint", url, "--timeout", "600", "a query", "one", "two"],
            "demo": ["demo", "--endpoint", url, "--timeout", "600"]}[name]


def test_ctrl_c_on_probe_stops_it_with_one_line_and_no_leak_warning(start, held_server) -> None:
    """``timeout -s INT 2 a0-reranker probe URL`` printed "Unclosed client session" after its line."""
    probe = start(*server_command("probe", held_server.url))
    held_server.gate.wait_held_sync(1, within_s=EXIT_WITHIN_S)
    probe.signal_group(signal.SIGINT)
    code, stdout, stderr = probe.finish()
    assert (code, stdout) == (130, "")
    assert_clean(stderr, "a0-reranker probe: interrupted")


@pytest.mark.parametrize("name", ["probe", "rerank", "demo"])
def test_a_double_ctrl_c_exits_at_once_with_130(start, held_server, name: str) -> None:
    command = start(*server_command(name, held_server.url))
    held_server.gate.wait_held_sync(1, within_s=EXIT_WITHIN_S)
    command.signal_group(signal.SIGINT)
    command.read_stderr_until("interrupted")  # the first is handled: the command is unwinding
    command.signal_group(signal.SIGINT)
    code, stdout, stderr = command.finish()
    assert (code, stdout) == (130, "")
    assert_clean(stderr, f"a0-reranker {name}: interrupted")


@pytest.mark.parametrize("mode", list(BENCH_MODES))
def test_sigterm_to_the_group_stops_every_bench_mode_and_its_servers(start, tmp_path, mode: str) -> None:
    """``timeout 3 a0-reranker bench --quick`` (the benchmark's command then) hung: the group's SIGTERM
    killed the server process while it held a lock the benchmark then waited on forever."""
    bench = start(*BENCH_MODES[mode], "--out", str(tmp_path), module=BENCH_MODULE)
    bench.read_stderr_until("1/")  # the first progress step: its servers are up
    bench.watch_group()
    assert len(bench.pidfds) >= 2  # a server at least, and multiprocessing's resource tracker
    bench.signal_group(signal.SIGTERM)
    code, _stdout, stderr = bench.finish()
    assert bench.group_ended()
    assert code == 143, stderr
    assert_clean(stderr, f"{BENCH_PROG}: terminated")
    assert list(tmp_path.iterdir()) == []  # no result of a run that did not finish


@pytest.mark.parametrize("mode", ["bench", "bench --overload", "bench --burst"])
def test_a_double_ctrl_c_stops_every_bench_mode_and_its_servers(start, tmp_path, mode: str) -> None:
    bench = start(*BENCH_MODES[mode], "--out", str(tmp_path), module=BENCH_MODULE)
    bench.read_stderr_until("1/")
    bench.watch_group()
    assert len(bench.pidfds) >= 2
    bench.signal_group(signal.SIGINT)
    bench.read_stderr_until("interrupted")
    bench.signal_group(signal.SIGINT)
    code, _stdout, stderr = bench.finish()
    assert bench.group_ended()
    assert code == 130, stderr
    assert_clean(stderr, f"{BENCH_PROG}: interrupted")


def test_timeout_ends_bench_quick_with_143(package_path, tmp_path) -> None:
    """The README's promise, under ``timeout`` itself: whenever its SIGTERM lands (while Python starts,
    while the server starts, during the measurement), the benchmark ends with 143 and no traceback."""
    timeout = subprocess.run(["timeout", "--preserve-status", "3", sys.executable, "-m", BENCH_MODULE,
                              "--quick", "--recalls", "1000000", "--out", str(tmp_path)],
                             env=cli_env(package_path), capture_output=True, text=True, timeout=EXIT_WITHIN_S * 2)
    assert timeout.returncode == 143, timeout.stderr
    assert not [word for word in NOT_ON_STDERR if word in timeout.stderr], timeout.stderr
    lines = [line for line in timeout.stderr.splitlines() if not line.startswith("[")]  # progress steps aside
    assert lines in ([], [f"{BENCH_PROG}: terminated"]), timeout.stderr


AFTER_EXIT_HOOKS = """
import atexit, os, signal, sys
from a0_reranker.cli import exits
stop = sys.argv[1] == "stop"
try:
    with exits.stop_on_signals("x"):
        if stop:
            os.kill(os.getpid(), signal.SIGTERM)
except exits.Stopped:
    pass
def shown(handler):
    names = {signal.SIG_IGN: "ignored", signal.SIG_DFL: "default"}
    return names.get(handler) or handler.__name__
before = [shown(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)]
atexit._run_exitfuncs()
after = [shown(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)]
print(*before, *after)
"""


@pytest.mark.parametrize(("stop", "handlers"), [
    ("stop", "_again _again ignored ignored"),  # until the teardown a further signal exits at once
    ("run", "default_int_handler default default_int_handler default"),  # no signal: left as they were
], ids=["stopped", "not stopped"])
def test_after_a_stop_the_last_exit_hook_ignores_further_signals(package_path, stop: str, handlers: str) -> None:
    """Python puts the default handlers back late in its teardown, after every exit hook; a second Ctrl-C
    arriving then killed a stopped command by the signal (exit -2) instead of letting it exit 130."""
    result = subprocess.run([sys.executable, "-c", AFTER_EXIT_HOOKS, stop], env=cli_env(package_path),
                            capture_output=True, text=True, timeout=EXIT_WITHIN_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == handlers.split()
