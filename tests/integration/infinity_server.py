"""Start a real Infinity server (``infinity-emb``) on 127.0.0.1 for the integration tier.

``infinity_python()`` finds the interpreter that has ``infinity_emb`` (``$A0R_INFINITY_PYTHON``, or the
one running the tests); ``require_infinity()`` skips the tier when there is none, or fails it when
``$A0R_REQUIRE_INFINITY`` is set, so CI cannot skip it silently. ``build_model()`` builds the tiny
cross-encoder of ``infinity_model.py`` in that interpreter (torch never loads into the test process,
whose warnings are errors), and ``run_infinity()`` serves it and stops it again.

The server runs hermetically: no hub access (``HF_HUB_OFFLINE``), no telemetry (``DO_NOT_TRACK``,
``INFINITY_ANONYMOUS_USAGE_STATS=0``), no inherited ``INFINITY_*`` settings, and its cache and working
directory in a temporary folder, so nothing is written to the repository.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.ports import fresh_port

HERE = Path(__file__).resolve().parent
MODEL_SCRIPT = HERE / "infinity_model.py"
SERVED_MODEL_NAME = "a0r-tiny-reranker"
STARTUP_DEADLINE_S = 300.0  # a loaded 2-core machine once took over 120 s to start the second replica
STOP_GRACE_S = 15.0

_TRUTHY = {"1", "true", "yes", "on"}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


def infinity_python() -> str | None:
    """The interpreter that runs Infinity and the model build, or None when none has infinity_emb."""
    configured = os.environ.get("A0R_INFINITY_PYTHON")
    if configured:
        return configured
    if importlib.util.find_spec("infinity_emb") is not None:
        return sys.executable
    return None


def require_infinity() -> str:
    """Return the Infinity interpreter; skip (or fail, under A0R_REQUIRE_INFINITY) without one."""
    python = infinity_python()
    if python is not None:
        return python
    reason = (
        "infinity_emb is not installed in this interpreter and A0R_INFINITY_PYTHON is unset "
        "(pip install -r tests/integration/requirements.txt)"
    )
    if _env_flag("A0R_REQUIRE_INFINITY"):
        pytest.fail(f"A0R_REQUIRE_INFINITY is set but {reason}", pytrace=False)
    pytest.skip(f"{reason}; set A0R_REQUIRE_INFINITY=1 to make this an error")


def hermetic_env(home: Path) -> dict[str, str]:
    """Environment for the Infinity and model-build subprocesses: offline, no telemetry, no strays."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFINITY_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(home / "hf"),
        DO_NOT_TRACK="1",
        INFINITY_ANONYMOUS_USAGE_STATS="0",
        INFINITY_HOME=str(home),  # Infinity puts .infinity_cache here instead of the working directory
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    # One torch thread each: the training took 166 s with torch's default threads on a busy 2-core machine
    # and 29 s with one, and two replicas on two cores only fight over more. A caller's own choice stands.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    return env


def build_model(python: str, dest: Path) -> dict[str, object]:
    """Build (or copy from cache) the tiny reranker into ``dest`` with ``python``; return its report."""
    with tempfile.TemporaryDirectory(prefix="a0r-build-") as home:
        proc = subprocess.run(
            [python, str(MODEL_SCRIPT), str(dest)],
            env=hermetic_env(Path(home)),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"building the tiny reranker failed:\n{proc.stderr[-4000:]}")
    report: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def free_port() -> int:
    """A port from the session's registry (``support.ports``), released for the Infinity process to bind."""
    return fresh_port()


@dataclass(frozen=True)
class InfinityServer:
    root_url: str  # http://127.0.0.1:PORT; /health and /metrics live here whatever the prefix
    base_url: str  # root_url + url_prefix; /rerank and /models live here
    model_name: str
    api_key: str | None
    url_prefix: str
    log_path: Path
    startup_s: float
    pid: int = 0  # the server's process, which leads its own process group

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def kill(self) -> None:
        """Kill the server at once (SIGKILL to its process group), as a crash would: the system closes
        its sockets and later connections are refused. The block's exit then has nothing left to stop."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return "<no log>"


def _healthy(root_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{root_url}/health", timeout=2) as resp:
            return resp.status == 200 and "unix" in json.loads(resp.read())
    except (OSError, ValueError):  # refused / reset / timeout / not JSON yet
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)  # uvicorn shuts down gracefully, Infinity stops its engine threads
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE_S)


def _command(
    python: str,
    model_dir: Path,
    port: int,
    *,
    served_model_name: str,
    url_prefix: str,
    api_key: str | None,
    batch_size: int,
) -> list[str]:
    cmd = [
        python,
        "-m",
        "infinity_emb.cli",
        "v2",
        "--model-id",
        str(model_dir),
        "--served-model-name",
        served_model_name,
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--batch-size",
        str(batch_size),
        "--no-bettertransformer",
        "--no-compile",
        "--no-vector-disk-cache",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "info",
    ]
    if url_prefix:
        cmd += ["--url-prefix", url_prefix]
    if api_key:
        cmd += ["--api-key", api_key]
    return cmd


@contextlib.contextmanager
def run_infinity(
    python: str,
    model_dir: Path,
    *,
    served_model_name: str = SERVED_MODEL_NAME,
    url_prefix: str = "",
    api_key: str | None = None,
    batch_size: int = 32,
    workdir: Path | None = None,
) -> Iterator[InfinityServer]:
    """Serve ``model_dir`` with Infinity on a free loopback port until the block exits."""
    with contextlib.ExitStack() as stack:
        home = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        home.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        for attempt in range(3):  # another process may take the free port before Infinity binds it
            port = free_port()
            log_path = home / f"infinity-{port}.log"
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    _command(
                        python,
                        model_dir,
                        port,
                        served_model_name=served_model_name,
                        url_prefix=url_prefix,
                        api_key=api_key,
                        batch_size=batch_size,
                    ),
                    env=hermetic_env(home),
                    cwd=home,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            stack.callback(_stop, proc)
            root_url = f"http://127.0.0.1:{port}"
            if _wait_healthy(proc, root_url, log_path, started + STARTUP_DEADLINE_S):
                break
            if attempt == 2 or "address already in use" not in _log_tail(log_path).lower():
                raise RuntimeError(
                    f"Infinity exited with {proc.returncode} before /health answered; log:\n{_log_tail(log_path)}"
                )
        yield InfinityServer(
            root_url=root_url,
            base_url=root_url + url_prefix,
            model_name=served_model_name,
            api_key=api_key,
            url_prefix=url_prefix,
            log_path=log_path,
            startup_s=time.monotonic() - started,
            pid=proc.pid,
        )


def _wait_healthy(proc: subprocess.Popen[bytes], root_url: str, log_path: Path, deadline: float) -> bool:
    """True once /health answers; False if the process exits first; raises at the deadline."""
    delay = 0.05
    while not _healthy(root_url):
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Infinity did not answer /health within {STARTUP_DEADLINE_S:.0f}s; log:\n{_log_tail(log_path)}"
            )
        time.sleep(delay)  # polling a foreign process; backs off up to 0.5 s
        delay = min(delay * 2, 0.5)
    return True
