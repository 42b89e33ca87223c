"""The job-queue scheduler's TLS: private files, and clients without the certificate refused."""

import asyncio
import os
import stat

import pytest

from accelml.executors.tls import TemporaryCredentials


def test_certificate_files_are_readable_by_the_user_only(tmp_path):
    with TemporaryCredentials.create(tmp_path) as credentials:
        assert stat.S_IMODE(os.stat(credentials.directory).st_mode) == 0o700
        for path in (credentials.ca_file, credentials.cert_file, credentials.key_file):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not credentials.directory.exists()


async def _try_connect(address, security):
    from distributed import Client

    async with Client(address, security=security, asynchronous=True, timeout=5) as client:
        return client.scheduler_info()["address"]


def test_a_client_without_the_certificate_is_refused(tmp_path):
    from distributed import Scheduler

    ours = TemporaryCredentials.create(tmp_path)
    someone_else = TemporaryCredentials.create(tmp_path)

    async def scenario():
        async with Scheduler(protocol="tls://", security=ours.security(), dashboard_address=None) as scheduler:
            address = scheduler.address
            assert address.startswith("tls://")
            with pytest.raises(OSError):   # certificates from another CA
                await _try_connect(address, someone_else.security())
            with pytest.raises(OSError):   # plain TCP, no certificate at all
                await _try_connect(address.replace("tls://", "tcp://"), None)
            assert await _try_connect(address, ours.security()) == address

    asyncio.run(scenario())
