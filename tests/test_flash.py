"""`fpgaplace flash` against a real OpenSSH server on 127.0.0.1 (tests/sshd.py) that writes into
a stand-in board folder: full copy, skip, kill and resume, corruption, and one-line failures."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sshd import LocalSshd, closed_port, make_key, start_sshd
from typer.testing import CliRunner

from fpgaplace import Design
from fpgaplace.cli.app import app
from fpgaplace.deploy.pynq import MANIFEST_NAME, PART_SUFFIX, connect, flash, project_files, verify_parts
from fpgaplace.model import zoo as models
from fpgaplace.util.errors import FpgaplaceError

FPGAPLACE = str(Path(sys.executable).parent / "fpgaplace")
BITSTREAM_BYTES = 3 << 20  # big enough for a throttled copy to be killed midway
DRIVER_DOUBLE = '''\
"""Test double of the generated host/driver.py: prints the self-test contract's JSON line.

It reads design.json from the folder it runs in (proving it runs in the flashed destination)
and reports its number of cores as the samples; ok is set by the test that writes it."""
import json
import sys

document = json.load(open("design.json"))
assert sys.argv[1:] == ["--self-test", "--json"], sys.argv
print("loading the overlay (test double)")
print(json.dumps({{"ok": {ok}, "fps": 1234.5, "samples": len(document["cores"]), "max_abs_diff_lsb": 0.0}}))
sys.exit(0 if {ok} else 1)
'''


@pytest.fixture(scope="module")
def sshd(tmp_path_factory) -> LocalSshd:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """The tiny CNN's project with a stand-in bitstream (random bytes: no Vivado here).

    The build-script, driver and RTL writers are left out (stubbed): flash is tested on what it
    sends, and the tests put into host/ what they need (sample data, a driver test double)."""
    folder = tmp_path_factory.mktemp("compiled") / "cnn"
    design = Design(models.cnn_residual(batch=1), "zcu104-dpu", profile_cpu=False).quantized(random_samples=2)
    design.place()
    with pytest.MonkeyPatch.context() as patch:
        for writer in ("write_build_scripts", "write_host_driver", "write_rtl_project"):
            patch.setattr(f"fpgaplace.codegen.project.{writer}", lambda document, folder: None)
        design.compile(folder)
    (folder / "bitstream").mkdir()
    (folder / "bitstream" / "design.bit").write_bytes(os.urandom(BITSTREAM_BYTES))
    (folder / "bitstream" / "design.hwh").write_bytes(os.urandom(50_000))
    (folder / "host").mkdir(exist_ok=True)
    (folder / "host" / "samples.npz").write_bytes(os.urandom(20_000))
    return folder


@pytest.fixture
def project(compiled: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cnn"
    shutil.copytree(compiled, copy)
    return copy


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Run:
    """What a command printed and how it ended."""

    returncode: int
    stdout: str
    stderr: str


def flash_arguments(sshd: LocalSshd, project: Path, dest: Path, *extra: str, key: Path | None = None,
                    known_hosts: Path | None = None, port: int | None = None) -> list[str]:
    known_hosts = known_hosts or dest.parent / "known_hosts"
    return ["flash", str(project), "--host", sshd.host, "--port", str(port or sshd.port), "--user", sshd.user,
            "--key", str(key or sshd.client_key), "--dest", str(dest), "--known-hosts", str(known_hosts), *extra]


def flash_cli(sshd: LocalSshd, project: Path, dest: Path, *extra: str, **options) -> Run:
    """``fpgaplace flash`` in this process (typer's runner; the kill test runs the real executable)."""
    result = CliRunner().invoke(app, flash_arguments(sshd, project, dest, *extra, **options))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def flash_json(sshd: LocalSshd, project: Path, dest: Path, *extra: str) -> dict:
    result = flash_cli(sshd, project, dest, "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_one_line_error(result: Run, *names: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error:"), result.stderr
    assert sum(line.startswith("error:") for line in lines) == 1, result.stderr
    for name in names:
        assert name in lines[-1], (name, lines[-1])


def assert_same_files(project: Path, dest: Path, paths: list[str]) -> None:
    for path in paths:
        assert sha256(dest / path) == sha256(project / path), path


def remote_files(dest: Path) -> list[str]:
    return sorted(path.relative_to(dest).as_posix() for path in dest.rglob("*") if path.is_file())


# ---- what is sent -------------------------------------------------------------------------------


def test_project_files_are_design_bitstream_host_and_split_with_their_hashes(project):
    files = project_files(project)
    paths = [file.path for file in files]
    on_disk = ["design.json", "bitstream/design.bit", "bitstream/design.hwh", "host/samples.npz"]
    on_disk += [path.relative_to(project).as_posix() for path in (project / "split").iterdir()]
    assert sorted(paths) == sorted(on_disk)
    assert not any(path.startswith(("cores/", "include/")) for path in paths)
    for file in files:
        assert file.bytes == (project / file.path).stat().st_size
        assert file.sha256 == sha256(project / file.path)
    assert "bitstream/design.bit" not in [file.path for file in project_files(project, no_bitstream=True)]


def test_a_project_without_bitstream_is_refused_unless_no_bitstream(sshd, project, tmp_path):
    shutil.rmtree(project / "bitstream")
    dest = tmp_path / "board" / "cnn"
    assert_one_line_error(flash_cli(sshd, project, dest), "bitstream/design.bit", "--no-bitstream")
    assert not dest.exists()
    document = flash_json(sshd, project, dest, "--no-bitstream")
    assert not (dest / "bitstream").exists()
    assert document["verified"] and sorted(file["path"] for file in document["files"]) == [
        path for path in remote_files(dest) if path != MANIFEST_NAME
    ]


def test_a_cluster_project_needs_a_node_and_an_alveo_one_sends_its_xclbin(project):
    document = json.loads((project / "design.json").read_text())
    for index, core in enumerate(document["cores"]):
        core["node"] = f"node{index}"
    document["devices"] = [{"name": f"node{i}.core0", "node": f"node{i}"} for i in range(len(document["cores"]))]
    (project / "design.json").write_text(json.dumps(document))
    with pytest.raises(FpgaplaceError, match="node0, node1.*expected node"):
        project_files(project)
    with pytest.raises(FpgaplaceError, match="node 'node7' is not on the board"):
        project_files(project, node="node7")
    with pytest.raises(FpgaplaceError, match="bitstream/node1/design.bit: no bitstream"):
        project_files(project, node="node1")
    document["board"] = {"name": "alveo-u250", "source": "/nowhere/alveo-u250.yaml"}
    document["devices"] = document["devices"][:1]
    document["cores"] = document["cores"][:1]
    document["transfers"] = []  # the record's rules: a transfer joins devices of the design, and core1 is gone
    (project / "design.json").write_text(json.dumps(document))
    (project / "bitstream" / "design.xclbin").write_bytes(b"xclbin stand-in")
    paths = [file.path for file in project_files(project)]
    assert "bitstream/design.xclbin" in paths and "bitstream/design.bit" not in paths


# ---- copies -------------------------------------------------------------------------------------


def test_a_full_copy_lands_equal_with_a_manifest_and_a_trusted_host_key(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    document = flash_json(sshd, project, dest)
    paths = [file["path"] for file in document["files"]]
    assert remote_files(dest) == sorted([*paths, MANIFEST_NAME])
    assert_same_files(project, dest, paths)
    assert document["verified"] and not document["resumed"]
    assert document["sent_bytes"] == document["total_bytes"] == sum((project / p).stat().st_size for p in paths)
    manifest = json.loads((dest / MANIFEST_NAME).read_text())
    assert {file["path"]: file["sha256"] for file in manifest["files"]} == {p: sha256(project / p) for p in paths}
    known = (tmp_path / "board" / "known_hosts").read_text().split()
    assert known[0] == f"[127.0.0.1]:{sshd.port}" and known[1:] == Path(f"{sshd.host_key}.pub").read_text().split()[:2]

    again = flash_json(sshd, project, dest)
    assert again["sent_bytes"] == 0 and {file["action"] for file in again["files"]} == {"skipped"}
    assert (tmp_path / "board" / "known_hosts").read_text().count("\n") == 1


def test_a_new_host_key_is_added_after_the_known_ones(sshd, project, tmp_path):
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("# no newline at the end")
    flash(project, sshd.host, sshd.port, sshd.user, key=sshd.client_key, dest=str(tmp_path / "cnn"),
          known_hosts=known_hosts, no_bitstream=True)
    lines = known_hosts.read_text().splitlines()
    assert lines[0] == "# no newline at the end" and lines[1].startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")


def test_a_copy_killed_midway_resumes_and_sends_less_than_the_total(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    part = dest / "bitstream" / f"design.bit{PART_SUFFIX}"
    command = [FPGAPLACE, *flash_arguments(sshd, project, dest, "--bwlimit", "1500", known_hosts=tmp_path / "kh")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size >= 300_000) and time.monotonic() < deadline:
        assert process.poll() is None, "flash ended before it could be killed"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = part.stat().st_size
    assert 0 < partial < BITSTREAM_BYTES
    assert not (dest / MANIFEST_NAME).exists() and not (dest / "bitstream" / "design.bit").exists()
    assert_same_files(project, dest, [path for path in remote_files(dest) if not path.endswith(PART_SUFFIX)])

    result = flash_cli(sshd, project, dest, "--json", known_hosts=tmp_path / "kh")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    by_path = {file["path"]: file for file in document["files"]}
    assert document["resumed"] and by_path["bitstream/design.bit"]["action"] == "resumed"
    assert by_path["bitstream/design.bit"]["sent_bytes"] <= BITSTREAM_BYTES - partial
    assert document["sent_bytes"] < document["total_bytes"]
    assert "resumed at byte" in result.stderr
    assert_same_files(project, dest, list(by_path))
    assert not any(path.endswith(PART_SUFFIX) for path in remote_files(dest))


def test_a_corrupted_far_side_file_is_detected_and_sent_again(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    flash_json(sshd, project, dest)
    hwh = dest / "bitstream" / "design.hwh"
    data = bytearray(hwh.read_bytes())
    data[100] ^= 0xFF
    hwh.write_bytes(bytes(data))
    (dest / "design.json").write_text("truncated")
    document = flash_json(sshd, project, dest)
    by_path = {file["path"]: file for file in document["files"]}
    for path in ("bitstream/design.hwh", "design.json"):
        assert by_path[path]["action"] == "resent" and by_path[path]["sent_bytes"] == by_path[path]["bytes"]
    assert by_path["bitstream/design.bit"]["sent_bytes"] == 0
    assert document["verified"]
    assert_same_files(project, dest, list(by_path))


def test_a_part_file_that_is_not_a_prefix_is_sent_from_the_start(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    (dest / "bitstream").mkdir(parents=True)
    (dest / "bitstream" / f"design.bit{PART_SUFFIX}").write_bytes(b"not the bitstream" * 1000)
    result = flash(project, sshd.host, sshd.port, sshd.user, key=sshd.client_key, dest=str(dest),
                   known_hosts=tmp_path / "known_hosts")
    bit = next(file for file in result.files if file.path == "bitstream/design.bit")
    assert bit.action == "sent" and bit.sent_bytes == BITSTREAM_BYTES and not result.resumed
    assert sha256(dest / "bitstream" / "design.bit") == sha256(project / "bitstream" / "design.bit")


# ---- self-test ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ok", [True, False])
def test_self_test_runs_the_driver_in_the_destination_and_reports_pass_or_fail(sshd, project, tmp_path, ok):
    (project / "host" / "driver.py").write_text(DRIVER_DOUBLE.format(ok=ok))
    dest = tmp_path / "board" / "cnn"
    result = flash_cli(sshd, project, dest, "--self-test", "--python", sys.executable)
    assert result.returncode == (0 if ok else 1), result.stderr
    verdict = (result.stdout if ok else result.stderr)
    assert ("self-test: pass" if ok else "self-test: fail") in verdict and "1234.5 fps" in verdict
    document = flash_json(sshd, project, dest, "--self-test", "--python", sys.executable) if ok else None
    if ok:
        cores = len(json.loads((project / "design.json").read_text())["cores"])
        assert document["self_test"] == {"ok": True, "fps": 1234.5, "samples": cores, "max_abs_diff_lsb": 0.0,
                                         "exit_status": 0}


def test_self_test_without_a_driver_is_one_line(sshd, project, tmp_path):
    assert_one_line_error(flash_cli(sshd, project, tmp_path / "cnn", "--self-test"), "host/driver.py")


# ---- failures: one line naming the host and the file ---------------------------------------------


def test_a_wrong_key_is_refused_and_nothing_is_written(sshd, project, tmp_path):
    wrong = make_key(tmp_path / "wrong_ed25519")
    dest = tmp_path / "board" / "cnn"
    assert_one_line_error(flash_cli(sshd, project, dest, key=wrong), f"127.0.0.1:{sshd.port}", str(wrong))
    assert not dest.exists()


def test_a_closed_port_is_one_line(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    with closed_port() as port:
        result = flash_cli(sshd, project, dest, port=port)
    assert_one_line_error(result, f"127.0.0.1:{port}", str(dest), "cannot connect")


def test_a_destination_that_is_a_file_is_refused(sshd, project, tmp_path):
    dest = tmp_path / "board"
    dest.write_text("a file, not a folder")
    result = flash_cli(sshd, project, dest, known_hosts=tmp_path / "known_hosts")
    assert_one_line_error(result, f"127.0.0.1:{sshd.port}", str(dest), "not a folder")
    result = flash_cli(sshd, project, dest / "cnn", known_hosts=tmp_path / "known_hosts")
    assert_one_line_error(result, f"127.0.0.1:{sshd.port}", str(dest), "not a folder")
    assert dest.read_text() == "a file, not a folder"


def test_a_changed_host_key_is_refused(sshd, project, tmp_path):
    other = make_key(tmp_path / "other_host_ed25519")
    known_hosts = tmp_path / "known_hosts"
    kind, base64 = Path(f"{other}.pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {kind} {base64}\n")
    dest = tmp_path / "board" / "cnn"
    result = flash_cli(sshd, project, dest, known_hosts=known_hosts)
    assert_one_line_error(result, f"127.0.0.1:{sshd.port}", str(known_hosts), "host key changed")
    assert not dest.exists()
    assert known_hosts.read_text() == f"[127.0.0.1]:{sshd.port} {kind} {base64}\n"


def test_a_failure_midway_leaves_no_manifest_behind(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    flash(project, sshd.host, sshd.port, sshd.user, key=sshd.client_key, dest=str(dest),
          known_hosts=tmp_path / "known_hosts")
    assert (dest / MANIFEST_NAME).is_file()
    (project / "bitstream" / "design.bit").write_bytes(os.urandom(1000))  # a new build to flash
    shutil.rmtree(dest / "bitstream")
    (dest / "bitstream").write_text("in the way")
    result = flash_cli(sshd, project, dest, known_hosts=tmp_path / "known_hosts")
    assert_one_line_error(result, f"127.0.0.1:{sshd.port}", str(dest / "bitstream"), "not a folder")
    assert not (dest / MANIFEST_NAME).exists()


def test_a_part_that_differs_after_sending_is_removed_and_named(sshd, project, tmp_path):
    dest = tmp_path / "board" / "cnn"
    dest.mkdir(parents=True)
    design = next(file for file in project_files(project) if file.path == "design.json")
    (dest / f"design.json{PART_SUFFIX}").write_bytes((project / "design.json").read_bytes()[:-1] + b"!")
    with connect(sshd.host, sshd.port, sshd.user, str(dest), sshd.client_key, tmp_path / "known_hosts", 10) as far:
        with pytest.raises(FpgaplaceError, match=rf"127.0.0.1:{sshd.port}: {dest}/design.json.part: after sending"):
            verify_parts(far, [design])
    assert not (dest / f"design.json{PART_SUFFIX}").exists() and not (dest / "design.json").exists()


def test_a_driver_that_crashes_is_one_line_with_its_last_error_line(sshd, project, tmp_path):
    (project / "host" / "driver.py").write_text('raise SystemExit("driver test double: no overlay here")\n')
    result = flash_cli(sshd, project, tmp_path / "cnn", "--self-test", "--python", sys.executable)
    assert_one_line_error(result, f"127.0.0.1:{sshd.port}", "host/driver.py", "no overlay here", "exit 1")
