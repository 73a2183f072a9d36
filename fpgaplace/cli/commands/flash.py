"""``fpgaplace flash``: copy a project to a PYNQ board over SSH, verified and resumable; or load
an ECP5 board's bitstream with openFPGALoader (no ``--host``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fpgaplace.cli.options import JsonOption, ProjectArgument
from fpgaplace.cli.output import err, out, print_json, progress
from fpgaplace.util.errors import FpgaplaceError

# The library names its parameters; the user typed these flags.
FLASH_FLAGS = {
    "no_bitstream": "--no-bitstream",
    "node": "--node",
    "known_hosts": "--known-hosts",
}


def _flag_message(error: FpgaplaceError) -> FpgaplaceError:
    message = str(error)
    for parameter, flag in FLASH_FLAGS.items():
        message = re.sub(rf"(?<![\w-]){parameter}\b(?= )", flag, message)
    return FpgaplaceError(message)


def flash(
    project: ProjectArgument,
    host: Annotated[
        str | None, typer.Option("--host", help="The PYNQ board's name or address (none for an ECP5 board).")
    ] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Its SSH port.")] = 22,
    user: Annotated[str, typer.Option("--user", help="Login on the board (PYNQ images: xilinx).")] = "xilinx",
    key: Annotated[
        Path | None, typer.Option("--key", help="Private key file (default: the SSH agent and ~/.ssh keys).")
    ] = None,
    dest: Annotated[
        str | None, typer.Option("--dest", help="Folder on the board (default: ~/fpgaplace/<project name>).")
    ] = None,
    known_hosts: Annotated[
        Path | None,
        typer.Option("--known-hosts", help="Known-hosts file: a new host's key is added, a changed one refused "
                     "(default: ~/.ssh/known_hosts)."),
    ] = None,
    node: Annotated[str | None, typer.Option("--node", help="Which node of a cluster project to flash.")] = None,
    no_bitstream: Annotated[
        bool, typer.Option("--no-bitstream", help="Send the driver, weights and submodels without a bitstream.")
    ] = False,
    self_test: Annotated[
        bool, typer.Option("--self-test", help="Run the driver's self-test on the board; exit 1 when it fails.")
    ] = False,
    python: Annotated[
        str, typer.Option("--python", help="Command that runs the driver on the board, e.g. 'sudo python3'.")
    ] = "python3",
    bwlimit: Annotated[
        float | None, typer.Option("--bwlimit", min=1, help="Cap the send rate at this many kB/s.")
    ] = None,
    cable: Annotated[
        str | None, typer.Option("--cable", help="ECP5: openFPGALoader's cable instead of the board's own.")
    ] = None,
    write_flash: Annotated[
        bool, typer.Option("--write-flash", help="ECP5: write the configuration flash, not the FPGA's SRAM.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="ECP5: print openFPGALoader's command only.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Copy a project to a board over SSH: bitstream, design.json, driver, weights, CPU submodels.
    Without --host, an ECP5 project's bitstream is loaded over USB with openFPGALoader.

    Sizes and SHA-256 are checked on the board; files already there and equal are skipped and a
    copy that was interrupted continues where it stopped. Files land as <file>.part and get their
    name only once checked, and the folder's .fpgaplace-flash.json is written last.

    Example: fpgaplace flash project/ --host pynq --key ~/.ssh/id_ed25519 --self-test
    """
    if host is None:
        _load_ecp5(project, cable, write_flash, dry_run, as_json)
        return
    from fpgaplace.deploy.pynq import flash as flash_project

    try:
        result = flash_project(
            project, host, port=port, user=user, key=key, dest=dest, known_hosts=known_hosts,
            self_test=self_test, no_bitstream=no_bitstream, node=node, python=python,
            bwlimit_kbps=bwlimit, progress=progress,
        )
    except FpgaplaceError as error:
        raise _flag_message(error) from None
    document = result.to_json()
    if as_json:
        print_json(document)
    else:
        print_flash(document)
    if result.self_test is not None and not result.self_test.ok:
        raise typer.Exit(1)


def _load_ecp5(project: Path, cable: str | None, write_flash: bool, dry_run: bool, as_json: bool) -> None:
    """An ECP5 project's bitstream through openFPGALoader (``fpgaplace.deploy.fpga_loader``)."""
    from fpgaplace.deploy.fpga_loader import load

    try:
        result = load(project, to_flash=write_flash, cable=cable, dry_run=dry_run)
    except FpgaplaceError as error:
        message = str(error).replace("give cable", "give --cable").replace("give host", "give --host")
        raise FpgaplaceError(message.replace("loader=/path/to/openFPGALoader", "put it on PATH")) from None
    if as_json:
        print_json(result.to_json())
    elif not result.ran:
        out.print(" ".join(result.command), markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(f"loaded {project} with openFPGALoader", markup=False)


def print_flash(document: dict) -> None:
    """Per-file table (bytes, sent, action), the verified total and the self-test's verdict."""
    table = Table(title=f"flashed to {document['user']}@{document['host']}:{document['dest']}")
    for column in ("file", "bytes", "sent", "action"):
        table.add_column(column, justify="left" if column in ("file", "action") else "right")
    for file in document["files"]:
        table.add_row(file["path"], str(file["bytes"]), str(file["sent_bytes"]), file["action"])
    out.print(table)
    resumed = ", resumed" if document["resumed"] else ""
    out.print(
        f"verified {len(document['files'])} files, {document['total_bytes']} bytes "
        f"({document['sent_bytes']} sent{resumed}) in {document['seconds']:.2f} s"
    )
    test = document["self_test"]
    if test is not None:
        verdict = "[bold green]pass[/]" if test["ok"] else "[bold red]fail[/]"
        fps = f"{test['fps']:.1f} fps" if test["fps"] is not None else "no fps"
        (out if test["ok"] else err).print(
            f"self-test: {verdict}, {fps}, {test['samples']} samples, max diff {test['max_abs_diff_lsb']} LSB "
            f"(exit {test['exit_status']})"
        )
