"""The results store: one SQLite file per results directory, arrays content-addressed beside it.

Layout of a results directory (default ``./accelml-results/``)::

    accelml-results/
      results.sqlite          runs, case results, schema version (WAL mode)
      arrays/ab/abcdef....npy predictions and other arrays, named by their sha256 digest

Only the client process writes (the runner returns its arrays as bytes with its result).
Each finished case is one transaction, so an interrupted run keeps every finished case,
and ``(run_id, case_id)`` is the primary key, so a resumed run cannot duplicate one. Two
processes may write the same store at once: the database is in WAL mode with a busy
timeout and every write takes the write lock up front (``BEGIN IMMEDIATE``); arrays are
written to a temporary file and renamed into place.

The API (everything a reader such as a report or a reproducibility check needs)::

    from accelml.results.store import ResultsStore
    store = ResultsStore("accelml-results")          # a directory (created) or a .sqlite path
    store.list_runs()                 -> list[RunRecord], newest first
    store.get_run(run_id)             -> RunRecord (AccelmlError if unknown; a unique prefix works)
    store.latest_run()                -> RunRecord | None
    store.case_results(run_id)        -> list[CaseResult], in the run's planned case order
    store.case_result(run_id, case_id)-> CaseResult | None
    store.finished_case_ids(run_id)   -> set[str]
    store.read_array(digest)          -> numpy.ndarray (its content checked against the digest)
    store.has_array(digest)           -> bool
    store.verify(run_id)              -> StoreCheck (every record decoded, every array read)

A reader opens the store read-only (``ResultsStore(path, read_only=True)``): SQLite's
``mode=ro``, and where no writer has the database open (no ``-wal`` file) ``immutable=1``,
so it works on a read-only mount and creates and changes nothing. Anything wrong with a
store (an empty or non-SQLite file, damaged pages, a record that does not decode, an array
missing or not matching its digest) is a :class:`~accelml.errors.StoreError` naming the
file and what is wrong.

Writers (the compare client)::

    store.create_run(run_record)
    store.add_case_result(case_result, arrays={digest: npy_bytes})   # one transaction
    store.set_run_status(run_id, RunRecord.FINISHED)
    store.put_array(array)            -> digest  (idempotent)

>>> import tempfile, numpy as np
>>> store = ResultsStore(tempfile.mkdtemp())
>>> digest = store.put_array(np.arange(3))
>>> store.read_array(digest).tolist()
[0, 1, 2]
>>> store.list_runs()
[]
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import pwd
import re
import socket
import sqlite3
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelml.errors import AccelmlError, StoreError
from accelml.results.records import SCHEMA_VERSION, CaseResult, RunRecord

DEFAULT_RESULTS_DIR = "accelml-results"
DATABASE_NAME = "results.sqlite"
ARRAYS_DIR = "arrays"
LOCKS_DIR = "locks"
LOGS_DIR = "logs"
"""Under a store: ``logs/RUN_ID/CASE_ID-PID/``, the launcher's and ranks' logs of a case."""
BUSY_TIMEOUT_MS = 60_000

# cases.workers holds CaseResult.ranks: the column keeps the name it had before the rename.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    spec_name   TEXT NOT NULL,
    spec_hash   TEXT NOT NULL,
    status      TEXT NOT NULL,
    record_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    case_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    algorithm   TEXT NOT NULL,
    backend     TEXT NOT NULL,
    device      TEXT NOT NULL,
    workers     INTEGER NOT NULL,
    dataset     TEXT NOT NULL,
    env_hash    TEXT,
    finished_at TEXT NOT NULL,
    record_json TEXT NOT NULL,
    PRIMARY KEY (run_id, case_id)
);
CREATE INDEX IF NOT EXISTS cases_by_identity ON cases (algorithm, backend, device, dataset);
"""


def array_digest(array: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and C-order bytes: equal arrays get equal digests.

    >>> array_digest(np.zeros(2)) == array_digest(np.zeros(2, order="F"))
    True
    >>> array_digest(np.zeros(2)) == array_digest(np.zeros(2, dtype=np.float32))
    False
    """
    array = np.ascontiguousarray(array)
    hasher = hashlib.sha256()
    hasher.update(f"{array.dtype.str}|{array.shape}|".encode())
    hasher.update(array.tobytes())
    return hasher.hexdigest()


def array_to_npy_bytes(array: np.ndarray) -> bytes:
    """The ``.npy`` file content of an array (no pickles)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


RUN_ID_CHARACTERS = re.compile(r"[A-Za-z0-9.:+-]+")
"""What a run id (or a prefix of one) is made of: :func:`accelml.orchestration.new_run_id` gives
``20261126T051502-3fa9c1``; nothing that a pattern would read as a wildcard."""


def check_run_id(run_id: str) -> None:
    """A one-line :class:`StoreError` for a run id that could only match by accident.

    >>> check_run_id("20261126T05")
    >>> check_run_id("%")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    accelml.errors.StoreError: run id '%' is not a run id or a prefix of one: ... (no wildcards)
    >>> check_run_id("")
    Traceback (most recent call last):
    ...
    accelml.errors.StoreError: an empty run id matches nothing: give a run id, a unique prefix of one, or latest
    """
    if not run_id:
        raise StoreError("an empty run id matches nothing: give a run id, a unique prefix of "
                         "one, or latest")
    if not RUN_ID_CHARACTERS.fullmatch(run_id):
        raise StoreError(f"run id {run_id!r} is not a run id or a prefix of one: it has "
                         "letters, digits, '.', ':', '+' and '-' only (no wildcards)")


@dataclass(frozen=True)
class StoreCheck:
    """What :meth:`ResultsStore.verify` read: records decoded and arrays checked, all sound."""

    cases: int
    arrays: int


def _resolve(location: str | os.PathLike[str] | None) -> tuple[Path, Path]:
    path = Path(location if location is not None else DEFAULT_RESULTS_DIR)
    if path.suffix in (".sqlite", ".db", ".sqlite3"):
        return path.parent, path
    return path, path / DATABASE_NAME


def file_mode() -> int:
    """The mode every file of a store is written with: ``0o666`` less the process's umask
    (SQLite would give its database 0644, ``mkstemp`` arrays 0600), so a store that a group
    shares through its umask works for the whole group.

    >>> old = os.umask(0o007)
    >>> oct(file_mode())
    '0o660'
    >>> _ = os.umask(old)
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _use_wal(connection: sqlite3.Connection) -> None:
    """Put the database in WAL mode (kept in the file: a no-op once set). SQLite answers a
    switch that races another connection's with "database is locked" at once, without its
    busy timeout (two runs creating one store together), so the switch is retried until
    that timeout has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class ResultsStore:
    """A results directory: the SQLite database and the content-addressed arrays beside it.

    ``create=False`` refuses a directory without a store; ``read_only=True`` (implies it)
    opens the database read-only and never writes (what ``report`` and ``check`` do).
    """

    def __init__(self, location: str | os.PathLike[str] | None = None, *, create: bool = True,
                 read_only: bool = False):
        self.directory, self.database = _resolve(location)
        self.read_only = read_only
        if self.database.is_file():
            self._check_not_empty()
            if not read_only:
                self._check_writable()
        elif self.database.exists():
            raise StoreError(f"results store {self.database}: not a file")
        elif read_only or not create:
            raise StoreError(f"no results store at {self.database}")
        elif self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"results directory {self.directory} is a file, not a directory")
        else:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreError(f"cannot create results directory {self.directory}: "
                                 f"{error.strerror or error}") from None
            try:
                self._create()
            except OSError as error:
                raise StoreError(f"cannot create results store {self.database}: "
                                 f"{error.strerror or error}") from None
        self.arrays_directory = self.directory / ARRAYS_DIR
        with self._connect() as connection:
            if read_only:
                self._check_schema(connection)
            else:
                self._migrate(connection)

    def _create(self) -> None:
        """Make the database under a temporary name, in WAL mode with its tables, then link it
        into place, so that no other process ever opens a half-made store (two runs starting
        on one new directory); if another process linked its own first, use that one."""
        handle, temporary = tempfile.mkstemp(prefix=".results-", suffix=".sqlite", dir=self.directory)
        os.close(handle)
        try:
            os.chmod(temporary, file_mode())   # its -wal and -shm files copy this mode
            with closing(sqlite3.connect(temporary, isolation_level=None)) as connection:
                _use_wal(connection)
                self._migrate(connection)
            try:
                os.link(temporary, self.database)
            except FileExistsError:
                pass
        finally:
            for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
                with suppress(FileNotFoundError):
                    os.unlink(leftover)

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.directory)!r})"

    def _check_not_empty(self) -> None:
        """An empty database file is damage (SQLite would take it for a new database and
        write into it). Only ``stat``: the rest of the header is SQLite's to check (a
        Python ``open()`` and ``close()`` of the file would drop every POSIX lock this
        process holds on it, the locks of its open SQLite connections included, and a
        writer elsewhere would then delete the -wal and -shm files they still use)."""
        try:
            size = self.database.stat().st_size
        except OSError as error:
            raise StoreError(f"results store {self.database}: cannot read: "
                             f"{error.strerror or error}") from None
        if size == 0:
            raise StoreError(f"results store {self.database}: empty file (0 bytes), not a "
                             "results database")

    def _read_only(self, path: Path) -> StoreError:
        try:
            owner = path.stat().st_uid
            name = pwd.getpwuid(owner).pw_name
        except (OSError, KeyError):
            name = "another user"
        return StoreError(f"results store {self.database}: read-only: permission denied "
                          f"(cannot write {path}, owned by {name}); give --results-dir a "
                          "directory you can write, or read it with report / check --run")

    def _check_writable(self) -> None:
        """A writer needs the database and, for SQLite's -wal and -shm files, its directory
        (where those files do not exist yet)."""
        if not os.access(self.database, os.W_OK):
            raise self._read_only(self.database)
        journals = [Path(f"{self.database}{suffix}") for suffix in ("-wal", "-shm")]
        if not all(journal.exists() for journal in journals) and \
                not os.access(self.directory, os.W_OK | os.X_OK):
            raise self._read_only(self.directory)

    def _damaged(self, error: sqlite3.Error) -> StoreError:
        name = getattr(error, "sqlite_errorname", "")
        if name.startswith("SQLITE_READONLY"):
            return self._read_only(self.database)
        if name == "SQLITE_NOTADB":
            return StoreError(f"results store {self.database}: not an SQLite database (its "
                              "header is damaged or it is another kind of file)")
        return StoreError(f"results store {self.database}: unreadable ({error}); it is damaged "
                          "or not an accelml store")

    # -- connections -------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.database, timeout=BUSY_TIMEOUT_MS / 1000,
                                   isolation_level=None)
        # No -wal file: no writer has it open, and read-only media cannot hold the -shm a
        # WAL reader needs; immutable=1 reads the file as it is and creates nothing.
        immutable = not Path(f"{self.database}-wal").exists()
        uri = f"file:{urllib.parse.quote(str(self.database.absolute()))}?mode=ro" + (
            "&immutable=1" if immutable else "")
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = self._open()
        except sqlite3.Error as error:
            raise StoreError(f"cannot open results store {self.database}: {error}") from None
        with closing(connection):
            try:
                connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                if not self.read_only:
                    _use_wal(connection)
                    connection.execute("PRAGMA synchronous = NORMAL")
                    connection.execute("PRAGMA foreign_keys = ON")
                yield connection
            except sqlite3.DatabaseError as error:
                raise self._damaged(error) from None

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        """A store opened read-only must already be an accelml store this version reads."""
        try:
            row = connection.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is None:
            raise StoreError(f"results store {self.database}: not an accelml results store "
                             "(no schema version)")
        if int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"results store {self.database} has schema version {row[0]}; "
                             f"this accelml reads up to {SCHEMA_VERSION} (upgrade accelml)")

    def _run_record(self, text: str, run_id: str) -> RunRecord:
        try:
            return RunRecord.from_json(text)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise StoreError(f"results store {self.database}: run {run_id}: damaged record "
                             f"({type(error).__name__}: {error})") from None

    def _case_record(self, text: str, run_id: str, case_id: str) -> CaseResult:
        try:
            return CaseResult.from_json(text)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise StoreError(f"results store {self.database}: run {run_id} case {case_id}: "
                             f"damaged record ({type(error).__name__}: {error})") from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that holds the write lock from its start."""
        if self.read_only:
            raise StoreError(f"results store {self.database} is open read-only")
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def _migrate(self, connection: sqlite3.Connection) -> None:
        """Create the tables if needed (a write only the first time); refuse a newer schema.
        A store of an older schema is marked with this one (its tables are the same; records
        of every older version still read), so an older accelml names the reason it cannot
        read the records written now."""
        try:
            row = connection.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and int(row[0]) == SCHEMA_VERSION:
            return
        connection.execute("BEGIN IMMEDIATE")
        try:
            # executescript() would COMMIT on its own: run the statements one by one.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            row = connection.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                connection.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                                   (str(SCHEMA_VERSION),))
            elif int(row[0]) < SCHEMA_VERSION:
                connection.execute("UPDATE meta SET value=? WHERE key='schema_version'",
                                   (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"results store {self.database} has schema version {row[0]}; "
                    f"this accelml reads up to {SCHEMA_VERSION} (upgrade accelml)"
                )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    # -- runs ----------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> None:
        """Record a new run (its status is normally ``running``)."""
        with self._write() as connection:
            try:
                connection.execute(
                    "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
                    (run.run_id, run.created_at, run.spec_name, run.spec_hash, run.status,
                     run.to_json()),
                )
            except sqlite3.IntegrityError as error:
                raise AccelmlError(f"run {run.run_id} already exists in {self.database}") from error

    def set_run_status(self, run_id: str, status: str) -> None:
        with self._write() as connection:
            row = connection.execute("SELECT record_json FROM runs WHERE run_id=?",
                                     (run_id,)).fetchone()
            if row is None:
                raise AccelmlError(f"no run {run_id} in {self.database}")
            record = self._run_record(row[0], run_id)
            updated = RunRecord.from_dict({**record.to_dict(), "status": status})
            connection.execute("UPDATE runs SET status=?, record_json=? WHERE run_id=?",
                               (status, updated.to_json(), run_id))

    def list_runs(self) -> list[RunRecord]:
        """Every run in the store, newest first."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT run_id, record_json FROM runs ORDER BY created_at DESC, run_id DESC"
            ).fetchall()
        return [self._run_record(row[1], row[0]) for row in rows]

    def latest_run(self) -> RunRecord | None:
        runs = self.list_runs()
        return runs[0] if runs else None

    def get_run(self, run_id: str) -> RunRecord:
        """The run named ``run_id`` exactly, or by a unique prefix of it; an empty id, or one
        with characters no run id has (``%``, ``*``, ``_``, ``?``...), is an error, never a
        pattern (:func:`check_run_id`)."""
        check_run_id(run_id)
        with self._connect() as connection:
            rows = connection.execute("SELECT run_id, record_json FROM runs WHERE run_id = ?",
                                      (run_id,)).fetchall()
            if not rows:
                # the prefix is compared in Python: no SQL pattern ever sees the user's text
                ids = [row[0] for row in connection.execute("SELECT run_id FROM runs")
                       if str(row[0]).startswith(run_id)]
                rows = [connection.execute("SELECT run_id, record_json FROM runs "
                                           "WHERE run_id = ?", (found,)).fetchone()
                        for found in ids]
        if not rows:
            known = ", ".join(run.run_id for run in self.list_runs()[:5]) or "none"
            raise StoreError(f"no run {run_id!r} in {self.database} (latest: {known})")
        if len(rows) > 1:
            raise StoreError(f"run id prefix {run_id!r} is ambiguous: "
                             + ", ".join(sorted(row[0] for row in rows)))
        return self._run_record(rows[0][1], rows[0][0])

    @contextmanager
    def run_lock(self, run_id: str) -> Iterator[None]:
        """Hold ``run_id`` for this process while it runs the run's cases: a second process
        that asks (another ``compare --resume`` of the run) is refused with one line naming
        the holder, instead of running the same cases again and losing one set of results.
        The lock is the kernel's (``flock`` on a file under ``locks/``): it goes when its
        holder ends, killed or not.

        >>> import tempfile
        >>> store = ResultsStore(tempfile.mkdtemp())
        >>> with store.run_lock("r1"):
        ...     with ResultsStore(store.directory).run_lock("r1"):
        ...         pass  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        accelml.errors.StoreError: run r1 is being run by another process (pid ...); wait for it to end, then resume it
        """
        check_run_id(run_id)
        folder = self.directory / LOCKS_DIR
        try:
            folder.mkdir(exist_ok=True)
            handle = os.open(folder / f"{run_id}.lock", os.O_RDWR | os.O_CREAT, file_mode())
        except OSError as error:
            raise StoreError(f"cannot lock run {run_id} in {folder}: "
                             f"{error.strerror or error}") from None
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(handle, 200, 0).decode(errors="replace").strip() or "unknown"
                raise StoreError(f"run {run_id} is being run by another process ({holder}); "
                                 "wait for it to end, then resume it") from None
            os.ftruncate(handle, 0)
            os.pwrite(handle, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
            yield
        finally:
            os.close(handle)     # releases the lock

    # -- case results --------------------------------------------------------------------

    def add_case_result(self, result: CaseResult, arrays: Mapping[str, bytes] | None = None,
                        *, replace_failed: bool = False) -> bool:
        """Store one finished case in one transaction; its arrays are written first.

        ``arrays`` maps a digest to the ``.npy`` bytes of that array. Returns False (and
        changes nothing) when this case of this run is already stored, unless
        ``replace_failed`` and the stored one failed (a retry: the new result takes its place).
        """
        for digest, content in (arrays or {}).items():
            self._put_array_bytes(digest, content)
        with self._write() as connection:
            if connection.execute("SELECT 1 FROM runs WHERE run_id=?",
                                  (result.run_id,)).fetchone() is None:
                raise AccelmlError(f"no run {result.run_id} in {self.database}")
            if replace_failed:
                connection.execute("DELETE FROM cases WHERE run_id=? AND case_id=? AND status!=?",
                                   (result.run_id, result.case_id, CaseResult.OK))
            cursor = connection.execute(
                "INSERT OR IGNORE INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (result.run_id, result.case_id, result.status, result.algorithm, result.backend,
                 result.device, result.ranks, result.dataset, result.env_hash,
                 result.finished_at, result.to_json()),
            )
            return cursor.rowcount == 1

    def case_results(self, run_id: str) -> list[CaseResult]:
        """The stored results of a run, in the order its cases were planned."""
        run = self.get_run(run_id)
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT case_id, record_json FROM cases WHERE run_id=? ORDER BY finished_at",
                (run.run_id,),
            ).fetchall()
        order = {case_id: index for index, case_id in enumerate(run.case_ids)}
        rows.sort(key=lambda row: order.get(row[0], len(order)))
        return [self._case_record(row[1], run.run_id, row[0]) for row in rows]

    def case_result(self, run_id: str, case_id: str) -> CaseResult | None:
        with self._connect() as connection:
            row = connection.execute(
                "SELECT record_json FROM cases WHERE run_id=? AND case_id=?", (run_id, case_id)
            ).fetchone()
        return None if row is None else self._case_record(row[0], run_id, case_id)

    def finished_case_ids(self, run_id: str) -> set[str]:
        """Cases of the run that are stored (ok or failed): what ``--resume`` skips."""
        with self._connect() as connection:
            rows = connection.execute("SELECT case_id FROM cases WHERE run_id=?",
                                      (run_id,)).fetchall()
        return {row[0] for row in rows}

    # -- arrays ----------------------------------------------------------------------------

    def _array_path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise AccelmlError(f"not an array digest: {digest!r}")
        return self.arrays_directory / digest[:2] / f"{digest}.npy"

    def has_array(self, digest: str) -> bool:
        return self._array_path(digest).exists()

    def _put_array_bytes(self, digest: str, content: bytes) -> None:
        path = self._array_path(digest)
        if path.exists():
            return
        array = np.load(io.BytesIO(content), allow_pickle=False)
        if array_digest(array) != digest:
            raise AccelmlError(f"array content does not match its digest {digest[:12]}")
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            os.fchmod(handle, file_mode())
            with os.fdopen(handle, "wb") as out:
                out.write(content)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def put_array(self, array: np.ndarray) -> str:
        """Keep an array under its content digest (idempotent) and return the digest."""
        digest = array_digest(array)
        self._put_array_bytes(digest, array_to_npy_bytes(array))
        return digest

    def read_array(self, digest: str) -> np.ndarray:
        """The array stored under ``digest``; a missing file, one that is not an ``.npy`` and
        one whose content does not match the digest are :class:`StoreError`."""
        path = self._array_path(digest)
        if not path.is_file():
            raise StoreError(f"array file {path} is missing from the results store")
        try:
            array: np.ndarray = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            raise StoreError(f"array file {path} is damaged: not a readable .npy ({error})") from None
        if array_digest(array) != digest:
            raise StoreError(f"array file {path} is damaged: its content does not match its digest")
        return array

    def verify(self, run_id: str) -> StoreCheck:
        """Check a run as stored: the database's pages (SQLite ``quick_check``), every case
        record, and every array a case refers to (read and checked against its digest)."""
        with self._connect() as connection:
            problems = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise StoreError(f"results store {self.database}: damaged pages ({problems[0]})")
        results = self.case_results(run_id)
        digests = {ref.digest for result in results for ref in result.predictions}
        for digest in sorted(digests):
            self.read_array(digest)
        return StoreCheck(cases=len(results), arrays=len(digests))
