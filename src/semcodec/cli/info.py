"""The commands that describe: info (a .sem file's layers), models (the bundles and the releases
this installation decodes) and doctor (the machine, for bug reports)."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

import click

from semcodec.batch.stdio import display, read_input, stdin_bytes
from semcodec.cli.common import (
    EXIT_FAILURE,
    STDIO,
    debug_enabled,
    debug_option,
    describe_error,
    error,
    import_torch,
    with_name,
)
from semcodec.decoder.info import file_info, format_info


@click.command()
def doctor() -> None:
    """Print versions, CPU, instruction set, the bf16 decision and threads (for bug reports)."""
    import_torch()
    from semcodec import runtime

    for key, value in runtime.diagnostics().items():
        click.echo(f"{key}: {value}")


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON on stdout: a list of one object per file, whatever their number.",
)
@debug_option
@click.pass_context
def info(ctx: click.Context, files: tuple[str, ...], as_json: bool) -> None:
    """Validate .sem files and show size, dimensions, model, quality and bytes/bpp per layer."""
    if STDIO in files and len(files) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    stdin_data = stdin_bytes() if STDIO in files else None
    results, failed = [], 0
    for f in files:
        name = display(f, "<stdin>")
        try:
            d = {"file": name, **file_info(read_input(f, stdin_data))}
        except Exception as exc:  # noqa: BLE001 - reported per file
            failed += 1
            if debug_enabled(ctx):
                traceback.print_exc(file=sys.stderr)
            reason = describe_error(exc)
            error(with_name(name, reason))
            results.append({"file": name, "error": reason})  # one object per input
            continue
        results.append(d)
        if not as_json:
            click.echo(format_info(name, d))
    if as_json:
        click.echo(json.dumps(results, indent=2))  # one shape for one file or many
    if failed:
        if len(files) > 1:
            error(f"{failed} of {len(files)} files failed")
        ctx.exit(EXIT_FAILURE)


# ----- models ------------------------------------------------------------------------------------
@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="JSON list on stdout.")
@debug_option
def models_command(as_json: bool) -> None:
    """List the registered model bundles, and the releases whose files this installation decodes."""
    from semcodec.decoder import parts
    from semcodec.zoo import registry

    rows = []
    for name, spec in sorted(registry.REGISTRY.items()):
        row: dict[str, Any] = {"name": name, "hash": None, "bytes": None, "weights": spec.weights}
        if spec.weights is None:
            row["source"] = f"random init (seed {spec.seed}; hash on load)"
        else:
            try:
                path = registry.weights_path(name)
                digest = registry.weights_hash(path)
            except (OSError, ModuleNotFoundError, TypeError, ValueError):
                row["source"] = "missing"
            else:
                row.update(hash=digest, bytes=path.stat().st_size, source=spec.weights)
        rows.append(row)
    releases = [
        {"release": f"{m['name']}-{m['hash'][:8]}", "hash": m["hash"], "date": m["released"]}
        for m in parts.installed_release_meta()
    ]
    if as_json:
        click.echo(json.dumps({"models": rows, "decodes": releases}, indent=2))
        return
    for r in rows:
        size = "-" if r["bytes"] is None else f"{r['bytes']} bytes"
        click.echo(f"{r['name']:<16} {r['hash'] or '-':<16}  {size:>16}  {r['source']}")
    if releases:
        click.echo(
            "decodes files of: " + ", ".join(f"{r['release']} ({r['date']})" for r in releases)
        )
