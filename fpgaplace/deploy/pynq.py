"""Flash a project onto a PYNQ (or Alveo host) board over SSH, resumably and verified.

What goes over: ``design.json``, the node's bitstream (``bitstream/design.bit`` + ``.hwh``, or
``.xclbin`` on Alveo: ``fpgaplace.project.layout.bitstream_files`` with ``fpgaplace.project.board.is_alveo``, so
flash looks for what ``make`` builds), everything under ``host/`` (the
driver, streamed weights, sample inputs with expected outputs) and ``split/`` (the CPU
submodels). The protocol, one SSH connection (key authentication, SFTP plus a few commands):

1. The far-side manifest ``.fpgaplace-flash.json`` is removed first, so a folder being changed
   never looks complete; it is written again (``.part`` + rename) only after every file checked.
2. One ``sha256sum`` on the far side hashes every file already there with the right size and
   every ``<file>.part``: an equal file is skipped, a ``.part`` whose content equals the local
   file's prefix is continued from its end, anything else is sent again from byte 0.
3. Files not skipped lose their far-side name at once (a stale one is removed), are written as
   ``<file>.part``, and one more ``sha256sum`` checks size and hash of every ``.part`` before it
   is renamed to its name. Wherever a flash stops, a file under its own name is therefore
   complete and equal to the one being flashed.

Host keys are trusted on first use (OpenSSH's ``StrictHostKeyChecking accept-new``): an unknown
host's key is appended to the known-hosts file, a known host offering a different key is refused.
Cost: every byte is read twice locally (hash, send) and hashed once or twice on the far side.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import socket
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import paramiko

from fpgaplace.project.board import is_alveo
from fpgaplace.project.layout import DESIGN_FILE, DRIVER_FILE, HOST_DIR, SPLIT_DIR, bitstream_files
from fpgaplace.project.record import DesignRecord, load
from fpgaplace.util.errors import FpgaplaceError, first_line

MANIFEST_NAME = ".fpgaplace-flash.json"
MANIFEST_FORMAT = "fpgaplace-flash/1"
PART_SUFFIX = ".part"
READ_BLOCK_BYTES = 1 << 16  # one local read and SFTP write (paramiko sends it as 32 KiB requests)
SFTP_WINDOW_BYTES = 1 << 24  # paramiko's 2 MiB default halves the rate on a fast link
PROGRESS_EVERY_S = 1.0
SKIPPED_FOLDERS = {"__pycache__"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LocalFile:
    """A project file to flash: ``path`` relative to the project (and to the destination)."""

    path: str
    source: Path
    bytes: int
    sha256: str


@dataclass(frozen=True)
class FlashedFile:
    """One file as it ended on the far side; ``action`` is skipped | resumed | sent | resent."""

    path: str
    bytes: int
    sha256: str
    sent_bytes: int
    action: str


@dataclass(frozen=True)
class SelfTest:
    """What ``host/driver.py --self-test --json`` printed on the board, and its exit status."""

    ok: bool
    fps: float | None
    samples: int | None
    max_abs_diff_lsb: float | None
    exit_status: int


@dataclass(frozen=True)
class FlashResult:
    host: str
    port: int
    user: str
    dest: str
    node: str
    files: list[FlashedFile]
    verified: bool
    resumed: bool
    seconds: float
    self_test: SelfTest | None = None

    @property
    def total_bytes(self) -> int:
        return sum(file.bytes for file in self.files)

    @property
    def sent_bytes(self) -> int:
        return sum(file.sent_bytes for file in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dest": self.dest,
            "node": self.node,
            "files": [asdict(file) for file in self.files],
            "total_bytes": self.total_bytes,
            "sent_bytes": self.sent_bytes,
            "verified": self.verified,
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
            "self_test": asdict(self.self_test) if self.self_test is not None else None,
        }


# ---- what to send ------------------------------------------------------------------------------


def project_files(project: Path, node: str | None = None, no_bitstream: bool = False) -> list[LocalFile]:
    """The files of ``project`` that flash sends, sorted by path, with sizes and SHA-256.

    ``node`` picks one node of a cluster project (required when its cores sit on several
    nodes); ``no_bitstream`` leaves the bitstream out (driver, weights and submodels only),
    else a missing bitstream is an error.
    """
    project = Path(project)
    document = load(project)
    paths = [DESIGN_FILE]
    if not no_bitstream:
        paths += _bitstream_paths(project, document, node)
    for folder in (HOST_DIR, SPLIT_DIR):
        paths += _files_under(project, folder)
    return [_local_file(project, path) for path in sorted(set(paths))]


def design_nodes(document: DesignRecord) -> tuple[list[str], list[str]]:
    """The board's nodes (from design.json's devices) and those that run FPGA cores, each sorted."""
    board_nodes = sorted({device.node for device in document.devices if device.node is not None})
    core_nodes = sorted({core.node for core in document.cores})
    return board_nodes or core_nodes or ["node0"], core_nodes


def flash_node(project: Path, node: str | None = None) -> str:
    """The node of ``project`` to flash: ``node`` checked against the board, else the one node
    that runs FPGA cores (a cluster project with cores on several nodes needs ``node``)."""
    return _pick_node(Path(project), load(Path(project)), node)[0]


def _pick_node(project: Path, document: DesignRecord, node: str | None) -> tuple[str, int]:
    """The node to flash and the count of nodes with FPGA cores (one bitstream each; above one,
    each lies in a folder of its node's name), as the build scripts count them."""
    board_nodes, core_nodes = design_nodes(document)
    if node is None:
        if len(core_nodes) > 1:
            raise FpgaplaceError(
                f"{project / DESIGN_FILE}: a cluster project with cores on nodes {', '.join(core_nodes)}; "
                "expected node to name the one to flash"
            )
        return (core_nodes or board_nodes)[0], max(len(core_nodes), 1)
    if node not in board_nodes:
        raise FpgaplaceError(
            f"{project / DESIGN_FILE}: node {node!r} is not on the board; expected one of {', '.join(board_nodes)}"
        )
    return node, max(len(core_nodes), 1)


def _bitstream_paths(project: Path, document: DesignRecord, node: str | None) -> list[str]:
    chosen, node_count = _pick_node(project, document, node)
    paths = bitstream_files(node_count, chosen, is_alveo(document))
    missing = [path for path in paths if not (project / path).is_file()]
    if missing:
        raise FpgaplaceError(
            f"{project / missing[0]}: no bitstream; build it first (make bitstream in the project), "
            "or flash with no_bitstream (driver and weights only)"
        )
    return paths


def _files_under(project: Path, folder: str) -> list[str]:
    root = project / folder
    if not root.is_dir():
        return []
    return [
        path.relative_to(project).as_posix()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not SKIPPED_FOLDERS & set(path.relative_to(root).parts)
    ]


def _local_file(project: Path, path: str) -> LocalFile:
    source = project / path
    return LocalFile(path=path, source=source, bytes=source.stat().st_size, sha256=file_sha256(source))


def file_sha256(path: Path, length: int | None = None) -> str:
    """SHA-256 (hex) of ``path``, or of its first ``length`` bytes. O(length) reads."""
    digest = hashlib.sha256()
    remaining = path.stat().st_size if length is None else length
    with path.open("rb") as stream:
        while remaining > 0:
            block = stream.read(min(READ_BLOCK_BYTES, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


# ---- the far side ------------------------------------------------------------------------------


class AcceptNewHostKey(paramiko.MissingHostKeyPolicy):
    """Trust on first use (OpenSSH's ``accept-new``): an unknown host's key is appended to
    ``known_hosts`` as one OpenSSH line (other lines are left as they are); a known host
    offering another key is refused by paramiko itself (``BadHostKeyException``)."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        try:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            ends_open = self.known_hosts.is_file() and not self.known_hosts.read_bytes().endswith(b"\n")
            with self.known_hosts.open("a") as stream:
                stream.write(("\n" if ends_open else "") + f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as error:
            raise FpgaplaceError(
                f"{hostname}: known hosts {self.known_hosts}: cannot record the host's key: {first_line(error)}"
            ) from None
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass
class FarSide:
    """An open SSH connection to the board with its SFTP session, rooted at ``dest``."""

    where: str  # user@host:port, the prefix of every error
    dest: str
    client: paramiko.SSHClient
    sftp: paramiko.SFTPClient
    made_folders: set[str] = field(default_factory=set)

    def path(self, relative: str) -> str:
        return posixpath.join(self.dest, relative)

    def fail(self, relative: str, problem: str) -> FpgaplaceError:
        return FpgaplaceError(f"{self.where}: {self.path(relative)}: {problem}")

    def stat(self, relative: str) -> paramiko.SFTPAttributes | None:
        try:
            return self.sftp.stat(self.path(relative))
        except FileNotFoundError:
            return None

    def make_folder(self, relative: str) -> None:
        """``mkdir -p`` of ``dest/relative``; an existing file in the way is an error."""
        target = posixpath.normpath(self.path(relative))
        parts = target.split("/")
        for end in range(1, len(parts) + 1):
            folder = "/".join(parts[:end]) or "/"
            if folder in self.made_folders or folder in ("", "."):
                continue
            try:
                attributes = self.sftp.stat(folder)
            except FileNotFoundError:
                self.sftp.mkdir(folder)
            else:
                if not stat.S_ISDIR(attributes.st_mode or 0):
                    raise FpgaplaceError(f"{self.where}: {folder}: a file, not a folder; expected a destination folder")
            self.made_folders.add(folder)

    def remove(self, relative: str) -> None:
        try:
            self.sftp.remove(self.path(relative))
        except FileNotFoundError:
            pass

    def run(self, command: str, timeout: float | None = None) -> tuple[int, str, str]:
        """Run ``command`` in the destination folder; (exit status, stdout, stderr)."""
        _, stdout, stderr = self.client.exec_command(f"cd {shlex.quote(self.dest)} && {command}", timeout=timeout)
        output, errors = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
        return stdout.channel.recv_exit_status(), output, errors

    def sha256(self, relatives: list[str]) -> dict[str, str]:
        """SHA-256 of far-side files (relative to dest) by one ``sha256sum``; missing files are left out."""
        if not relatives:
            return {}
        status, output, errors = self.run("sha256sum -- " + " ".join(shlex.quote(path) for path in relatives))
        if status == 127:
            raise self.fail(relatives[0], "sha256sum not found on the board; expected GNU coreutils")
        # Each line is the 64 hex digits, a space, " " (text) or "*" (binary), and the name.
        return {line[66:]: line[:64] for line in output.splitlines() if line[64:66] in ("  ", " *")}


def _where(user: str, host: str, port: int) -> str:
    return f"{user}@{host}:{port}"


def default_known_hosts() -> Path:
    return Path.home() / ".ssh" / "known_hosts"


def _normal_dest(dest: str) -> str:
    """A far-side folder for SFTP and the shell alike: ``~/x`` becomes ``x`` (relative paths are
    from the login folder in both)."""
    if dest in ("~", "~/"):
        return "."
    return posixpath.normpath(dest[2:] if dest.startswith("~/") else dest)


def _connect_problem(error: BaseException) -> str:
    """What went wrong reaching sshd, in words (paramiko wraps a refused port in
    ``NoValidConnectionsError`` with one socket error per address tried)."""
    if isinstance(error, paramiko.ssh_exception.NoValidConnectionsError):
        reasons = {getattr(cause, "strerror", None) or str(cause) for cause in error.errors.values()}
        return f"{'; '.join(sorted(reasons)).lower()} (is sshd running on that port?)"
    if isinstance(error, socket.timeout):
        return "timed out"
    return first_line(error)


@contextmanager
def connect(
    host: str,
    port: int,
    user: str,
    dest: str,
    key: Path | None,
    known_hosts: Path,
    timeout: float,
) -> Iterator[FarSide]:
    """An SSH + SFTP connection with key authentication; every failure one line naming the host
    and the key, known-hosts file or destination it concerns."""
    where = _where(user, host, port)
    if key is not None and not key.is_file():
        raise FpgaplaceError(f"{where}: key {key}: no such file; expected a private key (ssh-keygen)")
    client = paramiko.SSHClient()
    try:
        if known_hosts.is_file():
            client.load_host_keys(str(known_hosts))
    except (OSError, paramiko.SSHException, ValueError) as error:
        raise FpgaplaceError(f"{where}: known hosts {known_hosts}: unreadable: {first_line(error)}") from None
    client.set_missing_host_key_policy(AcceptNewHostKey(known_hosts))
    try:
        client.connect(
            host, port=port, username=user, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
            key_filename=str(key) if key is not None else None,
            look_for_keys=key is None, allow_agent=key is None,
        )
        sftp = paramiko.SFTPClient.from_transport(client.get_transport(), window_size=SFTP_WINDOW_BYTES)
    except paramiko.BadHostKeyException as error:
        client.close()
        raise FpgaplaceError(
            f"{where}: known hosts {known_hosts}: the host key changed (now {error.key.get_name()} "
            f"{error.key.get_fingerprint().hex()}); refused. If the board was re-imaged, remove its line"
        ) from None
    except paramiko.PasswordRequiredException:
        client.close()
        raise FpgaplaceError(f"{where}: key {key}: encrypted; expected a key without passphrase") from None
    except paramiko.AuthenticationException:
        client.close()
        which = f"key {key}" if key is not None else "the keys in ~/.ssh and the agent"
        raise FpgaplaceError(
            f"{where}: {which}: authentication as {user} refused; expected its public key in the board's "
            "~/.ssh/authorized_keys"
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as error:
        client.close()
        raise FpgaplaceError(f"{where}: {dest}: cannot connect: {_connect_problem(error)}") from None
    try:
        yield FarSide(where=where, dest=dest, client=client, sftp=sftp)
    finally:
        client.close()


# ---- sending -----------------------------------------------------------------------------------


@dataclass
class Throttle:
    """Keeps the average send rate at or below ``bytes_per_s`` (None: no limit) by sleeping."""

    bytes_per_s: float | None
    started: float = field(default_factory=time.monotonic)
    sent: int = 0

    def account(self, sent: int) -> None:
        self.sent += sent
        if self.bytes_per_s:
            ahead = self.sent / self.bytes_per_s - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


def _rate(sent: int, seconds: float) -> str:
    return f"{sent / max(seconds, 1e-9) / 1e6:.1f} MB/s"


def _send(far: FarSide, file: LocalFile, offset: int, throttle: Throttle, progress: Progress | None) -> int:
    """Write ``file`` from byte ``offset`` into its far-side ``.part``; the bytes sent."""
    far.make_folder(posixpath.dirname(file.path) or ".")
    started = last_report = time.monotonic()
    sent = 0
    part = far.path(file.path + PART_SUFFIX)
    with file.source.open("rb") as local, far.sftp.open(part, "r+b" if offset else "wb") as remote:
        remote.set_pipelined(True)
        local.seek(offset)
        remote.seek(offset)
        while block := local.read(READ_BLOCK_BYTES):
            remote.write(block)
            sent += len(block)
            throttle.account(len(block))
            now = time.monotonic()
            if progress is not None and now - last_report >= PROGRESS_EVERY_S:
                progress(f"{file.path}: {offset + sent} of {file.bytes} bytes, {_rate(sent, now - started)}")
                last_report = now
    if progress is not None:
        resumed = f" (resumed at byte {offset})" if offset else ""
        progress(f"{file.path}: sent {sent} bytes{resumed}, {_rate(sent, time.monotonic() - started)}")
    return sent


def _has_size(attributes: paramiko.SFTPAttributes | None, size: int) -> bool:
    return attributes is not None and attributes.st_size == size


def _plan(far: FarSide, files: list[LocalFile]) -> dict[str, tuple[str, int]]:
    """What each file needs: (action, first byte to send) from one far-side hash of the files
    already there and of the ``.part`` files (a part whose content is the local prefix is kept)."""
    finals = {file.path: far.stat(file.path) for file in files}
    parts = {file.path: far.stat(file.path + PART_SUFFIX) for file in files}
    to_hash = [file.path for file in files if _has_size(finals[file.path], file.bytes)]
    to_hash += [file.path + PART_SUFFIX for file in files if parts[file.path] is not None]
    hashes = far.sha256(to_hash)
    plan = {}
    for file in files:
        final, part = finals[file.path], parts[file.path]
        if _has_size(final, file.bytes) and hashes.get(file.path) == file.sha256:
            plan[file.path] = ("skipped", file.bytes)
            continue
        part_size = (part.st_size or 0) if part is not None else 0
        resumable = 0 < part_size <= file.bytes and (
            hashes.get(file.path + PART_SUFFIX) == file_sha256(file.source, part_size)
        )
        offset = part_size if resumable else 0
        plan[file.path] = ("resumed" if resumable else "resent" if final is not None else "sent", offset)
    return plan


def verify_parts(far: FarSide, files: list[LocalFile]) -> None:
    """Size and SHA-256 of every sent ``.part`` on the far side; a bad one is removed."""
    hashes = far.sha256([file.path + PART_SUFFIX for file in files])
    for file in files:
        part = file.path + PART_SUFFIX
        attributes = far.stat(part)
        size = attributes.st_size if attributes is not None else None
        if size != file.bytes or hashes.get(part) != file.sha256:
            far.remove(part)
            found = f"{size} bytes, sha256 {hashes.get(part, 'none')[:12]}" if size is not None else "missing"
            raise far.fail(part, f"after sending, {found}; expected {file.bytes} bytes, sha256 {file.sha256[:12]}")


def _write_manifest(far: FarSide, files: list[LocalFile], project: Path, node: str) -> None:
    manifest = {
        "format": MANIFEST_FORMAT,
        "project": project.resolve().name,
        "node": node,
        "flashed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [{"path": file.path, "bytes": file.bytes, "sha256": file.sha256} for file in files],
    }
    part = far.path(MANIFEST_NAME + PART_SUFFIX)
    with far.sftp.open(part, "w") as stream:
        stream.write(json.dumps(manifest, indent=2) + "\n")
    far.sftp.posix_rename(part, far.path(MANIFEST_NAME))


@dataclass
class Current:
    """The far-side file being worked on, for naming it when the connection or the disk fails."""

    path: str = "."


def _transfer(
    far: FarSide, files: list[LocalFile], project: Path, node: str, bwlimit_kbps: float | None,
    progress: Progress | None,
) -> list[FlashedFile]:
    """The module's protocol, steps 1-3 and the manifest; the files as they ended on the far side."""
    current = Current()
    try:
        far.make_folder(".")
        current.path = MANIFEST_NAME
        far.remove(MANIFEST_NAME)
        plan = _plan(far, files)
        for file in files:
            if plan[file.path][0] != "skipped":
                current.path = file.path
                far.remove(file.path)
        sent = _send_all(far, files, plan, Throttle(bwlimit_kbps * 1000 if bwlimit_kbps else None), current, progress)
        fresh = [file for file in files if plan[file.path][0] != "skipped"]
        current.path = fresh[0].path + PART_SUFFIX if fresh else "."
        verify_parts(far, fresh)
        for file in fresh:
            current.path = file.path
            far.sftp.posix_rename(far.path(file.path + PART_SUFFIX), far.path(file.path))
        current.path = MANIFEST_NAME
        _write_manifest(far, files, project, node)
    except (OSError, paramiko.SSHException, EOFError) as error:
        raise far.fail(current.path, f"transfer failed: {first_line(error)}") from None
    return [
        FlashedFile(file.path, file.bytes, file.sha256, sent[file.path], plan[file.path][0]) for file in files
    ]


def _send_all(
    far: FarSide, files: list[LocalFile], plan: dict[str, tuple[str, int]], throttle: Throttle, current: Current,
    progress: Progress | None,
) -> dict[str, int]:
    """Send every file the plan does not skip into its ``.part``; the bytes sent per file."""
    sent = {}
    for file in files:
        current.path = file.path
        action, offset = plan[file.path]
        if action == "skipped":
            sent[file.path] = 0
            if progress is not None:
                progress(f"{file.path}: equal on the board, skipped ({file.bytes} bytes)")
            continue
        current.path = file.path + PART_SUFFIX
        sent[file.path] = _send(far, file, offset, throttle, progress)
    return sent


def _run_self_test(far: FarSide, python: str, timeout: float) -> SelfTest:
    """``{python} host/driver.py --self-test --json`` on the board; its last JSON line read."""
    try:
        status, output, errors = far.run(f"{python} {DRIVER_FILE} --self-test --json", timeout=timeout)
    except TimeoutError:
        raise far.fail(DRIVER_FILE, f"--self-test gave no result within {timeout:g} s") from None
    except (OSError, paramiko.SSHException, EOFError) as error:
        raise far.fail(DRIVER_FILE, f"--self-test could not run: {first_line(error)}") from None
    report = None
    for line in reversed(output.splitlines()):
        try:
            candidate = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(candidate, dict) and "ok" in candidate:
            report = candidate
            break
    if report is None:
        said = [line.strip() for line in (errors or output).splitlines() if line.strip()]
        last = said[-1] if said else "nothing"  # a Python traceback's last line names the error
        raise far.fail(DRIVER_FILE, f"--self-test printed no JSON result (exit {status}): {last}")
    return SelfTest(
        ok=bool(report["ok"]) and status == 0,
        fps=report.get("fps"),
        samples=report.get("samples"),
        max_abs_diff_lsb=report.get("max_abs_diff_lsb"),
        exit_status=status,
    )


def flash(
    project: str | Path,
    host: str,
    port: int = 22,
    user: str = "xilinx",
    key: str | Path | None = None,
    dest: str | None = None,
    known_hosts: str | Path | None = None,
    self_test: bool = False,
    no_bitstream: bool = False,
    node: str | None = None,
    python: str = "python3",
    bwlimit_kbps: float | None = None,
    timeout: float = 10.0,
    self_test_timeout: float = 600.0,
    progress: Progress | None = None,
) -> FlashResult:
    """Copy ``project`` to ``dest`` on ``host`` over SSH (see the module docstring), optionally
    run the driver's self-test there.

    ``dest`` defaults to ``fpgaplace/<project folder name>`` in the login folder; ``known_hosts``
    to ``~/.ssh/known_hosts``; ``key`` to the SSH agent and ``~/.ssh`` keys. ``python`` is the
    far-side command that runs the driver. ``bwlimit_kbps`` caps the send rate (kB/s).
    """
    started = time.monotonic()
    project = Path(project)
    chosen = flash_node(project, node)
    files = project_files(project, node=chosen, no_bitstream=no_bitstream)
    if self_test and not (project / DRIVER_FILE).is_file():
        raise FpgaplaceError(f"{project / DRIVER_FILE}: no driver to self-test; expected compile to write it")
    folder = _normal_dest(dest if dest is not None else f"fpgaplace/{project.resolve().name}")
    known = Path(known_hosts) if known_hosts is not None else default_known_hosts()
    with connect(host, port, user, folder, Path(key) if key is not None else None, known, timeout) as far:
        flashed = _transfer(far, files, project, chosen, bwlimit_kbps, progress)
        if progress is not None:
            progress(f"verified {len(files)} files on {far.where}:{folder}")
        result_self_test = None
        if self_test:
            if progress is not None:
                progress(f"running {python} {DRIVER_FILE} --self-test on {far.where}")
            result_self_test = _run_self_test(far, python, self_test_timeout)
    return FlashResult(
        host=host, port=port, user=user, dest=folder, node=chosen, files=flashed, verified=True,
        resumed=any(file.action == "resumed" for file in flashed),
        seconds=time.monotonic() - started, self_test=result_self_test,
    )
