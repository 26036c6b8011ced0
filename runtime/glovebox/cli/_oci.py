"""``glovebox push`` and ``glovebox pull``: tools to and from OCI registries (thin over ``Runtime``)."""

from __future__ import annotations

import click

from ._base import open_runtime

__all__ = ["INSECURE_HELP", "pull", "push"]

INSECURE_HELP = "Plain http to a registry that is not on 127.0.0.1/localhost (https otherwise)."


@click.command()
@click.argument("ref")
@click.argument("target")
@click.option(
    "--key",
    "key_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Sign the pushed digest with this ECDSA P-256 private key (a cosign signature beside it; default: unsigned).",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.pass_context
def push(ctx: click.Context, ref: str, target: str, key_path: str | None, insecure: bool) -> None:
    """Publish the registered tool REF (NAME or NAME@VERSION) at TARGET (oci://HOST/REPO:TAG)."""
    with open_runtime(ctx) as rt:
        pinned = rt.push(ref, target, key=key_path, insecure=insecure)
    click.echo(f"pushed {pinned}" + (" (signed)" if key_path else ""))


@click.command()
@click.argument("source")
@click.option(
    "--to",
    "directory",
    required=True,
    type=click.Path(file_okay=False),
    help="The OCI image layout directory to write (created; register it with `glovebox register DIR`).",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.pass_context
def pull(ctx: click.Context, source: str, directory: str, insecure: bool) -> None:
    """Copy the artifact SOURCE (oci://HOST/REPO:TAG or @sha256:...) and its signatures into a directory."""
    with open_runtime(ctx) as rt:
        pinned = rt.pull(source, directory, insecure=insecure)
    click.echo(f"pulled {pinned} into {directory}")
