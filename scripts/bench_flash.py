"""Time and bytes of `fpgaplace flash` for the tiny CNN's project over a local sshd, median of 3.

The project is ``models.cnn_residual(batch=1)`` compiled for the ZCU104 plus a stand-in
bitstream (random bytes, since there is no Vivado here: ``--bitstream-mb``, default 19.3, an
estimate of an uncompressed XCZU7EV .bit; the .hwh stand-in is 0.3 MB). The server is the test
suite's real OpenSSH on 127.0.0.1 (tests/sshd.py), writing into a temporary "board" folder.

Three cases, each run 3 times into a fresh destination, medians reported:
  full     nothing on the far side;
  resumed  a first flash (the real command, throttled with --bwlimit) was killed once half of
           the bitstream had arrived; the time and bytes are those of the flash that resumes;
  equal    everything is already there (all files skipped after one far-side sha256sum).

    .venv/bin/python scripts/bench_flash.py
    .venv/bin/python scripts/bench_flash.py --bitstream-mb 4 --json
    .venv/bin/python scripts/bench_flash.py --project proj/   # an already compiled tiny-CNN project

What bounds the figures: paramiko's SFTP in Python (tens of MB/s on one core), both ends and
sshd sharing this machine's cores, and every far-side command starting the login shell (root's
.bashrc here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from sshd import LocalSshd, start_sshd  # noqa: E402

from fpgaplace import Design  # noqa: E402
from fpgaplace.deploy.pynq import PART_SUFFIX, connect, flash  # noqa: E402
from fpgaplace.model import zoo as models

RUNS = 3
FPGAPLACE = str(Path(sys.executable).parent / "fpgaplace")
KILL_BWLIMIT_KBPS = 20_000  # the interrupted first flash, slow enough to be killed midway


@dataclass(frozen=True)
class Row:
    case: str
    seconds: float
    sent_bytes: int
    total_bytes: int
    files: int

    @property
    def mb_per_s(self) -> float:
        return self.sent_bytes / self.seconds / 1e6 if self.seconds else 0.0


def make_project(folder: Path, bitstream_mb: float, compiled: Path | None) -> Path:
    """The tiny CNN's project (compiled now, or a copy of ``compiled``) with stand-in bitstream files."""
    if compiled is not None:
        shutil.copytree(compiled, folder)
    else:
        design = Design(models.cnn_residual(batch=1), "zcu104", profile_cpu=False).quantized(random_samples=2)
        design.place()
        design.compile(folder)
    (folder / "bitstream").mkdir(exist_ok=True)
    (folder / "bitstream" / "design.bit").write_bytes(os.urandom(int(bitstream_mb * 1e6)))
    (folder / "bitstream" / "design.hwh").write_bytes(os.urandom(300_000))
    return folder


def timed_flash(server: LocalSshd, project: Path, dest: Path, known_hosts: Path) -> tuple[float, int, int, int]:
    started = time.perf_counter()
    result = flash(project, server.host, server.port, server.user, key=server.client_key, dest=str(dest),
                   known_hosts=known_hosts)
    return time.perf_counter() - started, result.sent_bytes, result.total_bytes, len(result.files)


def interrupt_flash(server: LocalSshd, project: Path, dest: Path, known_hosts: Path) -> None:
    """Run the real command throttled and SIGKILL it once half of the bitstream is on the far side."""
    part = dest / "bitstream" / f"design.bit{PART_SUFFIX}"
    half = (project / "bitstream" / "design.bit").stat().st_size // 2
    command = [FPGAPLACE, "flash", str(project), "--host", server.host, "--port", str(server.port),
               "--user", server.user, "--key", str(server.client_key), "--dest", str(dest),
               "--known-hosts", str(known_hosts), "--bwlimit", str(KILL_BWLIMIT_KBPS)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (part.exists() and part.stat().st_size >= half):
        if process.poll() is not None:
            raise RuntimeError("the throttled flash ended before it could be interrupted")
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()


def run_case(case: str, server: LocalSshd, project: Path, work: Path) -> Row:
    measured = []
    for run in range(RUNS):
        dest = work / f"{case}{run}" / "cnn"
        known_hosts = work / "known_hosts"
        if case == "equal":
            timed_flash(server, project, dest, known_hosts)
        elif case == "resumed":
            interrupt_flash(server, project, dest, known_hosts)
        measured.append(timed_flash(server, project, dest, known_hosts))
        shutil.rmtree(dest.parent)
    seconds = statistics.median(m[0] for m in measured)
    sent = int(statistics.median(m[1] for m in measured))
    return Row(case, seconds, sent, measured[0][2], measured[0][3])


def command_seconds(server: LocalSshd, work: Path) -> float:
    """Median round trip of one far-side command (``true``): full and equal flashes run one
    (``sha256sum``), resumed ones two (what is there, then the check)."""
    with connect(server.host, server.port, server.user, ".", server.client_key, work / "known_hosts", 10) as far:
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            far.run("true")
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bitstream-mb", type=float, default=19.3, help="size of the stand-in .bit")
    parser.add_argument("--project", type=Path, help="flash a copy of this compiled tiny-CNN project instead")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flash-") as tmp:
        work = Path(tmp)
        project = make_project(work / "project" / "cnn", arguments.bitstream_mb, arguments.project)
        server = start_sshd(work / "sshd")
        try:
            rows = [run_case(case, server, project, work / "board") for case in ("full", "resumed", "equal")]
            command_s = command_seconds(server, work / "board")
        finally:
            server.stop()
    if arguments.json:
        cases = [asdict(row) | {"mb_per_s": round(row.mb_per_s, 2)} for row in rows]
        print(json.dumps({"cases": cases, "far_side_command_s": round(command_s, 3)}, indent=2))
        return
    print(f"tiny CNN project, {rows[0].files} files, {rows[0].total_bytes} bytes; median of {RUNS}")
    print(f"{'case':8} {'seconds':>8} {'sent bytes':>12} {'total bytes':>12} {'MB/s':>6}")
    for row in rows:
        print(f"{row.case:8} {row.seconds:8.2f} {row.sent_bytes:12d} {row.total_bytes:12d} {row.mb_per_s:6.1f}")
    print(f"one far-side command (login shell + `true`): {command_s:.2f} s")


if __name__ == "__main__":
    main()
