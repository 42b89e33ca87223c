"""Container runtimes: one module per runtime, each defining ``RUNTIME``, a :class:`Runtime` record.

A case whose spec names ``container = {runtime = "...", image = "...", binds = [...]}`` runs
its case process, and every rank that process starts, inside that image: the runner wraps
the command it starts with :meth:`Runtime.command`. Built in: ``charliecloud`` (``ch-run``),
``apptainer`` (``apptainer exec``) and ``singularity`` (``singularity exec``). A third party
adds one without editing accelml: a module defining ``RUNTIME`` and an entry point::

    [project.entry-points."accelml.containers"]
    podman-hpc = "acme_podman:RUNTIME"

What every runtime gets from the runner, and does the same way:

* the **environment** is cleaned (:attr:`Runtime.clean_environment`) and only what a case
  needs is passed in explicitly (:func:`passed_environment`: the variables accelml sets and
  the host's ``SLURM_*``, ``OMP_*``, ``HOROVOD_*`` ... of :data:`PASSED_PREFIXES`), so the
  host's ``LD_LIBRARY_PATH`` or ``PYTHONHOME`` never leaks into the image;
* **binds**: the spec's, the site's (``~/.config/dask/accelml.yaml``, ``accelml.container.binds``)
  and the folders the case must see at the same path (accelml's own source, its scratch
  folder, the dataset cache);
* **GPUs**: the runtime's own way (``--nv``; Charliecloud injects the host's NVIDIA
  libraries into the image once with ``ch-fromhost --nvidia``).

>>> from accelml.cases import Container
>>> record = RUNTIMES.get("apptainer")
>>> print(*record.command(Container("apptainer", "/img/stack.sif", ("/scratch",)), ["python3", "-V"],
...                       Launch(binds=("/work",), environment=(("OMP_NUM_THREADS", "2"),))))
apptainer exec --cleanenv --env OMP_NUM_THREADS=2 --bind /scratch --bind /work /img/stack.sif python3 -V
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from accelml.cases import Container
from accelml.errors import SpecError
from accelml.file_cache import Entry, cached_answer, file_entry, listing_key
from accelml.plugins import ExtensionPoint, unknown_choice
from accelml.probe import Availability
from accelml.results.records import ContainerImage

PASSED_PREFIXES = ("ACCELML_", "SLURM_", "SRUN_", "PMI_", "PMIX_", "OMPI_", "HOROVOD_", "NCCL_",
                   "OMP_", "MKL_", "OPENBLAS_", "BLIS_", "VECLIB_", "NUMEXPR_", "TF_", "KERAS_",
                   "XLA_", "JAX_", "TORCH", "CUDA_", "NVIDIA_", "PYTHON", "DASK_", "GLOO_",
                   "MASTER_", "XDG_", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
"""Host variables a case sees inside its container (everything else is cleaned away)."""
PASSED_NAMES = ("HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "TERM", "TZ")
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""``PATH`` inside an image: its own directories (the host's are not there)."""
RANK_CONTAINER_VARIABLE = "ACCELML_RANK_CONTAINER"
"""Set for a case process that stays on the host while its ranks run in a container (they are
started by srun or mpirun, which live on the host): JSON of the case's :class:`Container`."""
CONTAINER_VARIABLE = "ACCELML_CONTAINER"
"""Set inside the container: JSON of the :class:`~accelml.results.records.ContainerImage`
the case runs in (the environment fingerprint reads it)."""


@dataclass(frozen=True)
class Launch:
    """What the runner adds to a container's command: folders bound at the same path, the
    variables passed in, whether the case uses GPUs, and the working directory inside."""

    binds: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    gpus: bool = False
    workdir: str | None = None
    clean: bool = True
    """Start from an empty environment; False: the runtime passes the host's through (ranks
    need the variables their launcher sets for each of them: SLURM_PROCID, HOROVOD_RANK ...)."""


@dataclass(frozen=True)
class Runtime:
    """One container runtime: how to wrap a command in it and what it needs.

    ``executable`` is looked up on PATH; ``exec_arguments`` come right after it
    (``exec`` for Apptainer); ``bind``, ``set_variable`` and ``workdir`` turn one bind
    (``SRC[:DST]``), one variable and the working directory into arguments;
    ``clean_environment`` starts from an empty environment; ``gpu_arguments`` give it the
    host's GPUs (``gpu_note`` says what else a site does); ``separator`` goes between the
    image and the command (``--`` for ``ch-run``). ``image_problem(image)`` says why an image
    cannot be run ("" when it can).
    """

    name: str
    executable: str
    summary: str
    exec_arguments: tuple[str, ...]
    bind: Callable[[str], tuple[str, ...]]
    set_variable: Callable[[str, str], tuple[str, ...]]
    workdir: Callable[[str], tuple[str, ...]]
    clean_environment: tuple[str, ...]
    gpu_arguments: tuple[str, ...]
    gpu_note: str
    image_problem: Callable[[str], str]
    separator: tuple[str, ...] = ()
    version_arguments: tuple[str, ...] = ("--version",)
    environment_note: str = ""
    prepare: Callable[[str, tuple[str, ...]], str] = field(default=lambda image, binds: "")
    """Make ``image`` ready for ``binds`` (Charliecloud: their mount points); why not, or ""."""

    def command(self, container: Container, argv: Sequence[str], launch: Launch = Launch(),
                executable: str | None = None) -> list[str]:
        """``argv`` wrapped to run inside ``container`` (``executable``: the runtime's full path)."""
        arguments = [executable or self.executable, *self.exec_arguments,
                     *(self.clean_environment if launch.clean else ())]
        for name, value in launch.environment:
            arguments += self.set_variable(name, value)
        for bind in dict.fromkeys((*container.binds, *launch.binds)):
            arguments += self.bind(bind)
        if launch.workdir:
            arguments += self.workdir(launch.workdir)
        if launch.gpus:
            arguments += self.gpu_arguments
        return [*arguments, container.image, *self.separator, *argv]

    def host_environment(self, environment: Mapping[str, str]) -> dict[str, str]:
        """The environment the runtime's own process is started with (``ch-run`` needs ``USER``)."""
        return {"USER": pwd.getpwuid(os.getuid()).pw_name, **environment}

    def probe(self) -> Availability:
        """Installed (with its version) or not, and why."""
        path = shutil.which(self.executable)
        if path is None:
            return Availability(f"container {self.name}", "-", False, None,
                                f"not installed: {self.executable} is not on PATH", self.summary)
        try:
            out = subprocess.run([path, *self.version_arguments], capture_output=True, text=True,
                                 timeout=30, check=False,
                                 env=self.host_environment(os.environ))
        except (OSError, subprocess.TimeoutExpired) as error:
            return Availability(f"container {self.name}", "-", False, None,
                                f"{path} {' '.join(self.version_arguments)} failed: {error}", self.summary)
        text = (out.stdout.strip() or out.stderr.strip()).splitlines()
        version = text[0].split()[-1] if text and out.returncode == 0 else None
        if version is None:
            return Availability(f"container {self.name}", "-", False, None,
                                f"{path} {' '.join(self.version_arguments)} exited with "
                                f"{out.returncode}", self.summary)
        return Availability(f"container {self.name}", "-", True, version, path, self.summary)


RUNTIMES: ExtensionPoint[Runtime] = ExtensionPoint("container runtime", "accelml.containers",
                                                   "accelml.containers", "RUNTIME", Runtime)
"""Every container runtime: accelml's modules, then installed third parties' (entry points)."""


def site_defaults() -> dict[str, object]:
    """``accelml.container`` of dask's config (``~/.config/dask/accelml.yaml``): the site's
    ``runtime``, ``image``, ``binds`` and ``python`` for specs that leave them out."""
    import dask.config

    found = dask.config.get("accelml.container", default=None)
    return dict(found) if isinstance(found, Mapping) else {}


CONTAINER_KEYS = ("runtime", "image", "binds", "python")


def container_from(table: Mapping[str, object], where: str,
                   site: Mapping[str, object] | None = None) -> Container:
    """A :class:`Container` from a spec's table over the site's defaults; binds of both are
    kept (the site's first). A bad key or value is a :class:`SpecError` naming ``where``.

    >>> container_from({"runtime": "charliecloud", "image": "/img/x"}, "container", {"binds": ["/apps"]})
    Container(runtime='charliecloud', image='/img/x', binds=('/apps',), python='python3')
    """
    site = site_defaults() if site is None else site
    for source, values in (("the site's accelml.container", site), (where, table)):
        unknown = sorted(set(values) - set(CONTAINER_KEYS))
        if unknown:
            raise SpecError(f"{source}: unknown key {unknown[0]!r}; allowed: {', '.join(CONTAINER_KEYS)}")
    merged = {**site, **table}
    for key in ("runtime", "image"):
        if not isinstance(merged.get(key), str) or not merged[key]:
            raise SpecError(f"{where}.{key}: missing (a container needs runtime and image; "
                            "give it here or in accelml.container of ~/.config/dask/accelml.yaml)")
    if RUNTIMES.find(str(merged["runtime"])) is None:
        raise SpecError(f"{where}.runtime: {unknown_choice('container runtime', merged['runtime'], RUNTIMES.names())}")
    binds: list[str] = []
    for values in (site, table):
        given = values.get("binds", [])
        if not isinstance(given, list) or not all(isinstance(b, str) and b for b in given):
            raise SpecError(f"{where}.binds: expected a list of paths (SRC or SRC:DST)")
        binds += [os.path.expanduser(b) for b in given]
    python = merged.get("python", "python3")
    if not isinstance(python, str) or not python:
        raise SpecError(f"{where}.python: expected the interpreter inside the image, e.g. python3")
    return Container(str(merged["runtime"]), os.path.expanduser(str(merged["image"])),
                     tuple(dict.fromkeys(binds)), python)


def passed_environment(environment: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``environment`` a case sees inside its container, sorted; ``PATH``
    is the image's own, with the host folders of ``PATH`` that are bound in first.

    >>> passed_environment({"OMP_NUM_THREADS": "2", "LD_LIBRARY_PATH": "/opt", "PATH": "/bin"})
    (('OMP_NUM_THREADS', '2'), ('PATH', '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'))
    """
    kept = {name: value for name, value in environment.items()
            if name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)}
    kept["PATH"] = IMAGE_PATH
    return tuple(sorted(kept.items()))


def _tree_listing(root: Path) -> list[Entry]:
    entries = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            try:
                entries.append(file_entry(root, str(Path(folder, name).relative_to(root))))
            except OSError:
                continue
    return entries


def image_digest(image: str, cache_dir: str | None = None) -> str:
    """``sha256:...`` of the image's content: of a file image, its bytes; of a directory
    image, every file's relative path, mode and bytes (symbolic links: their target).

    Hashing a 700 MB image takes seconds, so the answer is kept in ``cache_dir`` (default
    ``~/.cache/accelml/image-digests``) under the image's listing (paths, modes, sizes,
    modification times): it is computed again only when a file of the image changes.
    """
    root = Path(image)
    listing = _tree_listing(root) if root.is_dir() else [file_entry(root.parent, root.name)]

    def compute() -> str:
        digest = hashlib.sha256()
        files = [(root / entry[0], entry) for entry in listing] if root.is_dir() \
            else [(root, listing[0])]
        for path, (relative, mode, _, _) in files:
            digest.update(f"{relative}\0{mode}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                with open(path, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        digest.update(chunk)
        return f"sha256:{digest.hexdigest()}"

    answer = cached_answer("image-digests", listing_key(root, listing), compute, cache_dir)
    assert answer is not None
    return answer


def why_unavailable(container: Container) -> str:
    """Why a case cannot run in ``container`` here ("" when it can): the runtime is not
    installed, or the image is missing or not one the runtime runs."""
    runtime = RUNTIMES.find(container.runtime)
    if runtime is None:
        return f"container runtime {container.runtime!r} is not known here"
    if shutil.which(runtime.executable) is None:
        return (f"container runtime {runtime.name} is not installed here "
                f"({runtime.executable} is not on PATH)")
    if not os.path.exists(container.image):
        return f"container image {container.image} does not exist"
    return runtime.image_problem(container.image)


def case_binds(*folders: str, environment: Mapping[str, str] = os.environ) -> list[str]:
    """What a case process or rank needs at the same path inside its container: ``folders``
    (accelml's source, its scratch folder, the dataset cache) and the home folder (written by
    libraries such as horovodrun's ``~/.horovod``; Apptainer binds it by default too), each
    once, a folder inside another one left out.

    >>> case_binds("/src", "/home/me/.cache/accelml", environment={"HOME": "/home/me"})
    ['/src', '/home/me']
    """
    wanted = [os.path.abspath(folder) for folder in (*folders, environment.get("HOME", "")) if folder]
    return [folder for folder in dict.fromkeys(wanted)
            if not any(folder != other and folder.startswith(other.rstrip("/") + "/") for other in wanted)]


def bind_source_destination(bind: str) -> tuple[str, str]:
    """``SRC[:DST[:OPTIONS]]`` -> ``(SRC, DST)``; DST defaults to SRC.

    >>> bind_source_destination("/scratch:/data:ro"), bind_source_destination("/apps")
    (('/scratch', '/data'), ('/apps', '/apps'))
    """
    parts = bind.split(":")
    return parts[0], parts[1] if len(parts) > 1 and parts[1] else parts[0]


def python_problem(container: Container, launch: Launch = Launch()) -> str:
    """Why ``container.python`` cannot run in the image ("" when it can): a quick
    ``python -c pass`` inside it."""
    runtime = RUNTIMES.get(container.runtime)
    executable = shutil.which(runtime.executable) or runtime.executable
    command = runtime.command(container, [container.python, "-c", "pass"],
                              replace(launch, gpus=False), executable)
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                             stdin=subprocess.DEVNULL,
                             env=runtime.host_environment(os.environ))
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{runtime.executable} could not start {container.python} in {container.image}: {error}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        return f"image {container.image} cannot run {container.python}: {last}"
    return ""


def image_identity(container: Container) -> ContainerImage:
    """``container``'s image as a result records it (the runtime's version, the content digest)."""
    runtime = RUNTIMES.get(container.runtime)
    return ContainerImage(runtime.name, runtime.probe().version or "unknown",
                          os.path.abspath(container.image), image_digest(container.image))


def rank_container(environment: Mapping[str, str] = os.environ) -> Container | None:
    """The container this case's ranks run in while it stays on the host (:data:`RANK_CONTAINER_VARIABLE`)."""
    text = environment.get(RANK_CONTAINER_VARIABLE)
    return None if not text else Container.from_dict(json.loads(text))


def running_image(environment: Mapping[str, str] = os.environ) -> ContainerImage | None:
    """The image this process runs in, as the runner told it (:data:`CONTAINER_VARIABLE`)."""
    text = environment.get(CONTAINER_VARIABLE)
    return None if not text else ContainerImage.from_dict(json.loads(text))


@dataclass(frozen=True)
class Wrapped:
    """A command wrapped to run in a container: the arguments, the environment to start the
    runtime with, and why it cannot run ("" when it can)."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    problem: str = ""


def wrap(container: Container, argv: Sequence[str], environment: Mapping[str, str], *,
         binds: Sequence[str] = (), gpus: bool = False, workdir: str | None = None,
         check: bool = True, clean: bool = True) -> Wrapped:
    """``argv`` (whose first word is the Python inside the image, or a command there) as the
    container's runtime starts it, with ``environment`` cleaned and passed in
    (:func:`passed_environment`), ``binds`` and the spec's bound at the same paths, the image
    identity in :data:`CONTAINER_VARIABLE`. ``check``: the runtime is installed, the image
    exists and runs ``container.python`` (otherwise ``problem`` says why, and nothing runs).
    ``clean=False`` (ranks): the runtime passes the launcher's environment through instead.
    """
    runtime = RUNTIMES.find(container.runtime)
    problem = why_unavailable(container) if check else ""
    if runtime is None or problem:
        return Wrapped(tuple(argv), (), problem or f"container runtime {container.runtime!r} is not known here")
    binds = tuple(dict.fromkeys(binds))
    problem = runtime.prepare(container.image, (*container.binds, *binds)) if check else ""
    extra = dict(passed_environment(environment)) if clean else {}
    if check and not problem:   # (after prepare: the digest of the image as it runs)
        extra[CONTAINER_VARIABLE] = json.dumps(image_identity(container).to_dict(), sort_keys=True)
    launch = Launch(binds=binds, environment=tuple(sorted(extra.items())),
                    gpus=gpus, workdir=workdir, clean=clean)
    executable = shutil.which(runtime.executable) or runtime.executable
    if check and not problem:
        problem = python_problem(container, launch)
    command = runtime.command(container, argv, launch, executable if check else None)
    return Wrapped(tuple(command), tuple(sorted(runtime.host_environment(environment).items())), problem)
