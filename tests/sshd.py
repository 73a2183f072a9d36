"""A real OpenSSH server on 127.0.0.1 for the flash tests: its own free port, host key,
authorized client key and config in one folder, run in the foreground and stopped by its pid.

Needs Debian's ``openssh-server`` (/usr/sbin/sshd) and root (``/run/sshd`` is sshd's privilege
separation folder; the login user is the one running the tests).
"""

from __future__ import annotations

import getpass
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
START_TIMEOUT_S = 10.0
BIND_ATTEMPTS = 5  # fresh free ports tried when another process takes the chosen one first

CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {folder}/host_ed25519
AuthorizedKeysFile {folder}/authorized_keys
PidFile {folder}/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
LogLevel ERROR
"""


@dataclass
class LocalSshd:
    """A running sshd: connect as ``user`` to 127.0.0.1:``port`` with ``client_key``."""

    folder: Path
    port: int
    user: str
    host_key: Path
    client_key: Path
    process: subprocess.Popen

    host: str = "127.0.0.1"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def make_key(path: Path) -> Path:
    """A fresh ed25519 key pair without passphrase at ``path`` (and ``path``.pub)."""
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for the block: bound here but not listening,
    so no other process (say a server a parallel test starts) can take it meanwhile."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def start_sshd(folder: Path, port: int | None = None, host_key: Path | None = None) -> LocalSshd:
    """Start sshd in ``folder`` (created) and wait until it accepts connections.

    ``host_key`` reuses a host key (default: a new one); ``port`` a port (default: a free one,
    and another one when something else took it before sshd could bind it, as a test running in
    a parallel worker may).
    """
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    host_key = host_key or make_key(folder / "host_ed25519")
    if host_key != folder / "host_ed25519":
        (folder / "host_ed25519").write_bytes(host_key.read_bytes())
        (folder / "host_ed25519").chmod(0o600)
    client_key = folder / "client_ed25519"
    if not client_key.exists():
        make_key(client_key)
    (folder / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    for attempt in range(1 if port else BIND_ATTEMPTS):
        chosen = port or free_port()
        config = folder / "sshd_config"
        config.write_text(CONFIG.format(port=chosen, folder=folder))
        (folder / "sshd.pid").unlink(missing_ok=True)
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_port(chosen, process, folder / "sshd.pid")
        except PortTaken:
            if port or attempt == BIND_ATTEMPTS - 1:
                raise
            continue
        return LocalSshd(folder, chosen, getpass.getuser(), folder / "host_ed25519", client_key, process)
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    """sshd could not bind its port: another process listens there."""


def _wait_for_port(port: int, process: subprocess.Popen, pid_file: Path) -> None:
    """Return once this sshd listens: it writes its pid file only after binding its port, so a
    port that answers while the file lacks our pid is someone else's (not yet ours, or never)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            message = process.stderr.read()
            kind = PortTaken if "Address already in use" in message else RuntimeError
            raise kind(f"sshd exited with {process.returncode}: {message}")
        written = pid_file.read_text().strip() if pid_file.exists() else ""
        if written == str(process.pid):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
        time.sleep(0.05)
    process.terminate()
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S} s")
