"""``python -m accelml.dl.loopback_horovodrun ARGS``: ``horovodrun ARGS`` whose servers listen
on 127.0.0.1 only.

``horovodrun --gloo`` starts an HTTP key-value server (the gloo rendezvous) that takes
unauthenticated ``PUT`` and ``GET`` from anyone who can reach it, and Horovod 0.28 binds it
(and its other runner services) to every interface: on a shared login or compute node,
anyone could write into a running job's rendezvous. accelml starts ``horovodrun`` on one
host only (``-H localhost:N``), where the ranks reach it through loopback, so this wrapper
makes Horovod's port finder bind 127.0.0.1 before running ``horovodrun`` as usual; the
ranks' gloo sockets follow ``HOROVOD_GLOO_IFACE``, which horovodrun sets to the loopback
interface for local hosts. A secret cannot guard the rendezvous instead: Horovod's
``HOROVOD_SECRET_KEY`` signs its driver and task services only, and the ranks' HTTP client
of the rendezvous sends no credential (see :func:`accelml.dl.strategies.horovod.listeners`).

Before it starts the ranks, ``horovodrun --gloo`` checks that Horovod was built with Gloo by
importing ``horovod.tensorflow`` (and TensorFlow with it) in a forked process: about 9 s of
CPU per launch, measured here, whatever framework the ranks use. The answer is a property of
the installed extensions, so this wrapper keeps a yes under their files' listing
(:mod:`accelml.file_cache`) and asks Horovod again only when they change (or with
``--verbose``, whose check prints what it found).

>>> server, port = loopback_port(lambda address: _Bound(address))
>>> server.address[0], port > 0
('127.0.0.1', True)
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from accelml.file_cache import cached_answer, file_entry, listing_key

Server = TypeVar("Server")

LOOPBACK = "127.0.0.1"


class _Bound:
    """A stand-in server for the doctest: binds a socket to ``address`` like an HTTPServer."""

    def __init__(self, address: tuple[str, int]):
        self.socket = socket.socket()
        self.socket.bind(address)
        self.address = self.socket.getsockname()
        self.server_address = self.address
        self.socket.close()


def loopback_port(server_factory: Callable[[tuple[str, int]], Server]) -> tuple[Server, int]:
    """Horovod's ``find_port`` on 127.0.0.1: the server is made on a port the system picks."""
    server = server_factory((LOOPBACK, 0))
    port = int(server.server_address[1])  # type: ignore[attr-defined]
    return server, port


def gloo_built_once(check: Callable[..., bool | None], horovod_root: Path
                    ) -> Callable[..., bool | None]:
    """Horovod's ``gloo_built(verbose=False)``, answered from the cache once it said yes for
    the extension files now under ``horovod_root`` (``*/mpi_lib*``); a no is never kept."""
    def built(verbose: bool = False) -> bool | None:
        if verbose:
            return check(verbose=verbose)
        listing = [file_entry(horovod_root, str(path.relative_to(horovod_root)))
                   for path in sorted(horovod_root.glob("*/mpi_lib*"))]
        found: list[bool | None] = []

        def ask() -> str | None:
            found.append(check(verbose=False))
            return "yes" if found[0] else None

        answer = cached_answer("horovod-gloo-built", listing_key(horovod_root, listing), ask)
        return True if answer == "yes" else found[0]
    return built


def main() -> None:
    """Run ``horovodrun`` with its servers bound to loopback (arguments as horovodrun's)."""
    import horovod
    from horovod.runner import launch
    from horovod.runner.common.service import driver_service, task_service
    from horovod.runner.common.util import network
    from horovod.runner.http import http_server

    for module in (http_server, network, driver_service, task_service):
        if hasattr(module, "find_port"):
            module.find_port = loopback_port
    launch.gloo_built = gloo_built_once(launch.gloo_built, Path(horovod.__file__).parent)
    sys.argv[0] = "horovodrun"
    launch.run_commandline()


if __name__ == "__main__":
    main()
