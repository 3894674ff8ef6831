"""Run a benchmark server in a child process, so its event loop never competes with the client's
for the GIL; the parent gets its URL and stops it on exit."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from typing import Any, Self

from aiohttp import web

AppFactory = Callable[..., web.Application]


def _serve(build_app: AppFactory, args: tuple[Any, ...], port_queue: Any, stop: Any) -> None:
    async def main() -> None:
        runner = web.AppRunner(build_app(*args), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port_queue.put(runner.addresses[0][1])
        await asyncio.to_thread(stop.wait)
        await runner.cleanup()

    asyncio.run(main())


class ChildProcessServer:
    """Context manager: ``build_app(*args)`` (a module-level function) served on 127.0.0.1 in a child."""

    def __init__(self, build_app: AppFactory, *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self._ports = context.Queue()
        self._stop = context.Event()
        self._process = context.Process(target=_serve, args=(build_app, args, self._ports, self._stop), daemon=True)
        self.url = ""
        self._killed = False

    def __enter__(self) -> Self:
        self._process.start()
        try:
            self.url = f"http://127.0.0.1:{self._ports.get(timeout=60)}"
        except BaseException:  # no port, or interrupted (Ctrl-C, SIGTERM) while waiting: stop the child too
            self.__exit__()
            raise
        return self

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would: the system closes its listening socket
        and every connection, and later connections to its port are refused. Returns without waiting."""
        self._killed = True
        self._process.kill()

    def __exit__(self, *exc: object) -> None:
        if not self._killed:  # a killed child may have died holding the event's lock: setting it would hang
            self._stop.set()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)
        self._ports.close()
        self._ports.join_thread()
