"""``cairn dashboard URL``: the command this distribution adds to ``cairn``.

Declared in the ``cairnflow.cli`` entry-point group (see ``pyproject.toml``), which
the core's command line loads when it starts; so this module imports only click
at import time, and Starlette, uvicorn and the store when the command runs.
Not even ``cairnflow.cli`` at import time: ``cairn`` imports this module while it
builds its group, so importing the group from here would be circular. Opening the
store and loading ``--app`` are the core's own functions, imported when the
command runs.
"""

from __future__ import annotations

import ipaddress
import os

import click

__all__ = ["dashboard"]

ENV_SECRET = "CAIRNFLOW_DASHBOARD_SECRET"  # noqa: S105 - a variable name, not a secret


@click.command("dashboard")
@click.argument("url")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8199, show_default=True, type=click.IntRange(0, 65535))
@click.option("--read-only", is_flag=True, help="Show everything, allow no action.")
@click.option(
    "--app",
    "app",
    default=None,
    help="module:attr naming the workflows whose schedules may be triggered (as cairn worker's).",
)
@click.option(
    "--secure-cookies", is_flag=True, help="Mark cookies Secure (when served over HTTPS)."
)
@click.option(
    "-o", "--option", "pairs", multiple=True, metavar="KEY=VALUE", help="A driver option."
)
def dashboard(
    url: str,
    host: str,
    port: int,
    read_only: bool,
    app: str | None,
    secure_cookies: bool,
    pairs: tuple[str, ...],
) -> None:
    """Serve the web dashboard for the store at URL (needs credentials in the environment).

    Set CAIRNFLOW_DASHBOARD_TOKEN, or CAIRNFLOW_DASHBOARD_USER and
    CAIRNFLOW_DASHBOARD_PASSWORD; it never starts without them.
    """
    import uvicorn

    import cairnflow as cf
    from cairnflow.cli._commands import _load_app, _open

    from ._app import DashboardSettings, create_app
    from ._auth import MissingCredentials, credentials_from_env

    try:
        credentials = credentials_from_env()
    except MissingCredentials as error:
        raise click.ClickException(str(error)) from None
    workflows = _load_app(app) if app else []
    if not _loopback(host):
        click.echo(
            f"warning: serving on {host}, reachable from other machines; put TLS in front "
            "and pass --secure-cookies",
            err=True,
        )
    store = _open(url, pairs, migrated=True)
    try:
        secret = os.environ.get(ENV_SECRET)
        settings = DashboardSettings(
            credentials=credentials,
            read_only=read_only,
            workflows=workflows,
            secure_cookies=secure_cookies,
            **({"session_secret": secret} if secret else {}),
        )
        web = create_app(cf.Client(store), settings)
        click.echo(f"cairnflow dashboard on http://{host}:{port}/ for {store.describe().url}")
        uvicorn.run(web, host=host, port=port, log_level="warning")
    finally:
        store.close()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
