"""Temporary TLS credentials for one job-queue cluster.

A job-queue scheduler runs on a login node that other users share. Its workers are the
user's own batch jobs, which read files from the user's home (or another shared
directory). So: a fresh self-signed CA and one certificate signed by it, written into a
directory only the user can read (0700, files 0600), used by the scheduler, the client and
the workers for mutual TLS (distributed requires the peer's certificate, signed by this CA).
Another user cannot read the key, so cannot connect, and a client without the certificate
is refused during the handshake. The directory is removed when the cluster closes.

>>> import tempfile, os, stat
>>> with tempfile.TemporaryDirectory() as base:
...     with TemporaryCredentials.create(base) as credentials:
...         mode = stat.S_IMODE(os.stat(credentials.key_file).st_mode)
...         security = credentials.security()
...     (oct(mode), security.require_encryption, os.path.exists(credentials.directory))
('0o600', True, False)
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from accelml.errors import UnavailableError

if TYPE_CHECKING:  # annotations only: distributed is imported when it is used
    from distributed.security import Security

_VALID_FOR = datetime.timedelta(days=7)


def _private_write(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


@dataclass(frozen=True)
class TemporaryCredentials:
    """A CA certificate, and a certificate + key signed by it, in a 0700 directory."""

    directory: Path

    @property
    def ca_file(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def cert_file(self) -> str:
        return str(self.directory / "cert.pem")

    @property
    def key_file(self) -> str:
        return str(self.directory / "key.pem")

    @classmethod
    def create(cls, base_directory: str | os.PathLike[str]) -> TemporaryCredentials:
        """Generate a CA and a certificate into a new private directory under ``base_directory``."""
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import NameOID
        except ImportError as error:
            raise UnavailableError(
                "TLS for the job-queue scheduler needs the 'cryptography' package "
                f"(pip install cryptography), or pass --no-tls on a private cluster: {error}"
            ) from None
        base = Path(os.path.expanduser(os.path.expandvars(str(base_directory))))
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory = Path(tempfile.mkdtemp(prefix="tls-", dir=base))
        os.chmod(directory, 0o700)

        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "accelml temporary CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                              content_commitment=False, key_encipherment=False,
                              data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "accelml dask cluster")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("dask-internal")]), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                       x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        credentials = cls(directory)
        pem = serialization.Encoding.PEM
        _private_write(Path(credentials.ca_file), ca_cert.public_bytes(pem))
        _private_write(Path(credentials.cert_file), cert.public_bytes(pem))
        _private_write(
            Path(credentials.key_file),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        )
        return credentials

    def security(self) -> Security:
        """A ``distributed.security.Security`` for every role (client, scheduler, worker)."""
        from distributed.security import Security

        return Security(
            require_encryption=True,
            tls_ca_file=self.ca_file,
            tls_client_cert=self.cert_file,
            tls_client_key=self.key_file,
            tls_scheduler_cert=self.cert_file,
            tls_scheduler_key=self.key_file,
            tls_worker_cert=self.cert_file,
            tls_worker_key=self.key_file,
        )

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()
