"""A network of its own for the ranks of a one-host run whose library listens on every interface.

TensorFlow's gRPC server (``multiworker``'s) binds ``0.0.0.0``/``[::]`` whatever address
``TF_CONFIG`` names, and takes unauthenticated requests. For a run on one host accelml
puts every rank into one private network namespace (Linux, an unprivileged user namespace
holding it): inside there is only a loopback interface, so the ranks reach each other and
nobody else can reach them; ``ss`` on the host does not even list their sockets.

:class:`PrivateNetwork` starts a small holder process in a new user + network namespace
(its loopback brought up); each rank's ``preexec_fn`` joins that namespace before it runs.
Where the kernel allows no user namespaces (``user.max_user_namespaces = 0``, some
container runtimes), :func:`PrivateNetwork.start` says why, and the run goes on with the
listener recorded as unauthenticated.

>>> network = PrivateNetwork.start()
>>> network.why_not or os.path.exists(f"/proc/{network.holder.pid}/ns/net")
True
>>> network.close()
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True) \
    if sys.platform.startswith("linux") else None
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SIOCSIFFLAGS = 0x8914
_IFF_UP_LOOPBACK_RUNNING = 0x1 | 0x8 | 0x40


def _fail(what: str) -> None:
    number = ctypes.get_errno()
    raise OSError(number, f"{what}: {os.strerror(number)}")


def _enter_new_namespace() -> None:
    """``preexec_fn`` of the holder: a new user namespace (this user mapped to itself) owning
    a new network namespace whose loopback interface is up."""
    uid, gid = os.getuid(), os.getgid()
    if _LIBC is None or _LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        _fail("unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", _IFF_UP_LOOPBACK_RUNNING))


@dataclass
class PrivateNetwork:
    """One private network namespace for the ranks of a run (``holder`` keeps it alive)."""

    holder: subprocess.Popen[bytes] | None
    descriptors: tuple[int, int] = (-1, -1)   # the holder's user and network namespaces
    why_not: str = ""                         # why there is none (then ranks join nothing)

    @classmethod
    def start(cls, preexec: Callable[[], None] | None = None) -> PrivateNetwork:
        """A holder in a new namespace (``preexec`` runs first in it, e.g. a parent-death
        signal), or one with ``why_not`` said where the kernel refuses."""
        if _LIBC is None:
            return cls(None, why_not="private network namespaces are Linux's")

        def enter() -> None:
            if preexec is not None:
                preexec()
            _enter_new_namespace()

        try:
            holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                      stdin=subprocess.PIPE, preexec_fn=enter)
        except (OSError, subprocess.SubprocessError) as error:
            return cls(None, why_not=f"this kernel gives no private network namespace ({error})")
        try:
            descriptors = (os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY),
                           os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY))
        except OSError as error:
            holder.kill()
            holder.wait()
            return cls(None, why_not=f"its namespace could not be opened ({error})")
        return cls(holder, descriptors)

    def joiner(self, preexec: Callable[[], None] | None = None) -> Callable[[], None]:
        """A ``preexec_fn`` that runs ``preexec`` and then joins this namespace (nothing to
        join where there is none)."""
        user, net = self.descriptors

        def join() -> None:
            if preexec is not None:
                preexec()
            if self.holder is None or _LIBC is None:
                return
            if _LIBC.setns(user, _CLONE_NEWUSER) != 0:
                _fail("setns (user namespace)")
            if _LIBC.setns(net, _CLONE_NEWNET) != 0:
                _fail("setns (network namespace)")

        return join

    def close(self) -> None:
        """End the holder (the namespace goes when its last rank has gone too)."""
        for descriptor in self.descriptors:
            if descriptor >= 0:
                with contextlib.suppress(OSError):
                    os.close(descriptor)
        self.descriptors = (-1, -1)
        if self.holder is not None:
            with contextlib.suppress(OSError):
                if self.holder.stdin is not None:
                    self.holder.stdin.close()
            self.holder.kill()
            self.holder.wait()
            self.holder = None
