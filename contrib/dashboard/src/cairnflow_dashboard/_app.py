"""The dashboard as a Starlette application: pages read through a client, actions as POSTs.

Everything goes through a :class:`cairnflow.Client` that is never started (the
reader the engine is made for: ``cairn runs`` and ``cairn stats`` use one too), so
the dashboard works on every store, and a capability the store does not declare
turns into a sentence on the page instead of an error (:func:`_needs`).

Security is the middleware's, in this order (outermost first): Starlette's
``SessionMiddleware`` (a signed cookie for a browser signed in on ``/login``),
``asgi-csrf`` (a POST that carries cookies carries the token of its CSRF cookie
too, or gets 403), ``AuthenticationMiddleware`` with :class:`~._auth.DashboardAuth`
(no credentials: 401 on every route but the login form and the stylesheet; the
login form it shows needs the CSRF token, hence this order). Actions also need
the ``act`` scope, which a read-only dashboard never grants (403).

Endpoints are plain functions: Starlette runs them in its thread pool, where the
client's blocking database calls belong.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from asgi_csrf import asgi_csrf  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.authentication import AuthenticationError, requires
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import cairnflow as cf
from cairnflow import Cap, Status
from cairnflow.store import PauseKind

from . import _format
from ._auth import SESSION_USER, Credentials, DashboardAuth
from ._svg import STATUS_COLOURS, DagNode, dag_svg, throughput_svg

__all__ = ["PUBLIC_PATHS", "DashboardSettings", "create_app", "route_paths"]

HERE = Path(__file__).parent

PUBLIC_PATHS = frozenset({"/login", "/static"})
"""What answers without credentials: the login form and the stylesheet, nothing else."""

_NOTICE = "cairnflow_dashboard_notice"
"""The session key of the notice an action leaves for the next page."""

_WINDOWS = {"1h": (1.0, 60.0), "6h": (6.0, 300.0), "24h": (24.0, 900.0)}
"""The throughput windows offered: hours shown and seconds per bar."""


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    """How one dashboard runs: its credentials, read-only or not, what it may trigger.

    ``workflows``: registered on the dashboard's client so that it can trigger their
    schedules (a run is made from the workflow's declaration); without them the
    schedules page says so. ``session_secret`` signs the session cookie (a fresh
    random one by default: a restart signs everyone out).
    """

    credentials: Credentials
    read_only: bool = False
    workflows: Sequence[cf.Workflow] = ()
    session_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    secure_cookies: bool = False
    title: str = "cairnflow"


def create_app(client: cf.Client, settings: DashboardSettings) -> Starlette:
    """The dashboard over ``client`` (never started by the dashboard; it is only read)."""
    if client.running:
        raise ValueError("the dashboard reads through a client that is not started")
    if settings.workflows:
        client.register(*settings.workflows)
    pages = _Pages(client, settings)
    routes = [
        Route("/", pages.home, name="home"),
        Route("/login", pages.login, methods=["GET", "POST"], name="login"),
        Route("/logout", pages.logout, methods=["POST"], name="logout"),
        Route("/runs", pages.runs, name="runs"),
        Route("/runs/{run_id}", pages.run, name="run"),
        Route("/runs/{run_id}/retry", pages.retry, methods=["POST"], name="retry"),
        Route("/runs/{run_id}/cancel", pages.cancel, methods=["POST"], name="cancel"),
        Route("/runs/{run_id}/delete", pages.delete, methods=["POST"], name="delete"),
        Route("/queues", pages.queues, name="queues"),
        Route("/queues/{name}/{act:str}", pages.queue_act, methods=["POST"], name="queue_act"),
        Route("/schedules", pages.schedules, name="schedules"),
        Route(
            "/schedules/{workflow}/{name}/{act:str}",
            pages.schedule_act,
            methods=["POST"],
            name="schedule_act",
        ),
        Route("/servers", pages.servers, name="servers"),
        Route("/throughput", pages.throughput, name="throughput"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [
        Middleware(
            SessionMiddleware,
            secret_key=settings.session_secret,
            session_cookie="cairnflow_dashboard",
            same_site="strict",
            https_only=settings.secure_cookies,
        ),
        Middleware(
            asgi_csrf,
            signing_secret=settings.session_secret,
            cookie_secure=settings.secure_cookies,
            cookie_samesite="Strict",
        ),
        Middleware(
            AuthenticationMiddleware,
            backend=DashboardAuth(
                settings.credentials, read_only=settings.read_only, public=PUBLIC_PATHS
            ),
            on_error=pages.refused,
        ),
    ]
    return Starlette(routes=routes, middleware=middleware)


class _Unsupported(Exception):
    """A page needs a capability the store does not declare."""

    def __init__(self, cap: Cap, what: str) -> None:
        super().__init__(f"this store does not declare {cap.name} ({cap.value}): {what}")


class _Pages:
    """The endpoints, over one client."""

    def __init__(self, client: cf.Client, settings: DashboardSettings) -> None:
        self.client = client
        self.settings = settings
        self.templates = Jinja2Templates(directory=HERE / "templates")
        env = self.templates.env
        env.filters.update(when=_format.when, duration=_format.duration, pretty=_format.pretty)
        env.globals.update(colours=STATUS_COLOURS, title=settings.title)

    # -- rendering -------------------------------------------------------------------------

    def render(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> Response:
        caps = self.client.capabilities
        context.setdefault("notice", request.session.pop(_NOTICE, None))
        context.setdefault("now", time.time_ns())
        context.update(
            caps={cap.name for cap in caps},
            read_only=self.settings.read_only,
            signed_in=request.user.is_authenticated,
            user=request.user.display_name if request.user.is_authenticated else "",
            csrftoken=request.scope["csrftoken"](),
            store=self.client.store.describe().url,
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)

    def refused(self, conn: HTTPConnection, error: AuthenticationError) -> Response:
        """No or bad credentials: 401, with the login form for a browser's GET."""
        if conn.scope.get("method") == "GET" and "authorization" not in conn.headers:
            request = Request(conn.scope)
            return self.templates.TemplateResponse(
                request,
                "login.html",
                {
                    "error": None,
                    "next": _safe_next(
                        conn.url.path + ("?" + conn.url.query if conn.url.query else "")
                    ),
                    "csrftoken": conn.scope["csrftoken"](),
                    "signed_in": False,
                    "read_only": self.settings.read_only,
                    "notice": None,
                },
                status_code=401,
            )
        return PlainTextResponse(
            str(error), status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )

    def _needs(self, cap: Cap, what: str) -> None:
        if cap not in self.client.capabilities:
            raise _Unsupported(cap, what)

    # -- signing in --------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = _safe_next(request.query_params.get("next", "/runs"))
        error = None
        if request.method == "POST":
            form = await request.form()
            target = _safe_next(_field(form, "next") or "/runs")
            user = self.settings.credentials.check_login(
                _field(form, "user"), _field(form, "password")
            )
            if user is not None:
                request.session.clear()
                request.session[SESSION_USER] = user
                return RedirectResponse(target, status_code=303)
            error = "Those credentials are not accepted."
        return self.render(request, "login.html", 401 if error else 200, error=error, next=target)

    @requires("authenticated")
    async def logout(self, request: Request) -> Response:
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    # -- pages -------------------------------------------------------------------------------

    @requires("read")
    def home(self, request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303)

    @requires("read")
    def runs(self, request: Request) -> Response:
        params = request.query_params
        filters = {
            "workflow": params.get("workflow", "").strip(),
            "queue": params.get("queue", "").strip(),
            "status": params.get("status", "").strip(),
            "label": params.get("label", "").strip(),
            "tenant": params.get("tenant", "").strip(),
        }
        context: dict[str, Any] = {
            "filters": filters,
            "statuses": [s.value for s in Status],
            "listing": None,
            "error": None,
            "unsupported": None,
            "next_url": None,
            "first_url": None,
            "tenants": Cap.TENANT in self.client.capabilities,
        }
        try:
            self._needs(Cap.RUN_QUERY, "runs cannot be listed")
            label_prefix = None
            if filters["label"]:
                name, sep, prefix = filters["label"].partition("=")
                if not sep or not name:
                    raise ValueError("label filter: write NAME=PREFIX, e.g. tenant=acme")
                self._needs(Cap.LABEL_PREFIX, "runs cannot be filtered by label prefix")
                label_prefix = (name, prefix)
            if filters["tenant"]:
                self._needs(Cap.TENANT, "runs cannot be filtered by tenant")
            listing = self.client.runs(
                workflow=filters["workflow"] or None,
                queue=filters["queue"] or None,
                status=filters["status"] or None,
                label_prefix=label_prefix,
                tenant=filters["tenant"] or None,
                cursor=params.get("cursor") or None,
                limit=50,
            )
            context["listing"] = listing
            kept = {k: v for k, v in filters.items() if v}
            if params.get("cursor"):
                context["first_url"] = "/runs?" + urlencode(kept)
            if listing.cursor is not None:
                context["next_url"] = "/runs?" + urlencode({**kept, "cursor": listing.cursor})
        except _Unsupported as error:
            context["unsupported"] = str(error)
        except (ValueError, cf.CairnError) as error:
            context["error"] = str(error)
            return self.render(request, "runs.html", 400, **context)
        return self.render(request, "runs.html", **context)

    @requires("read")
    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            info = self.client.info(run_id)
        except cf.RunNotFound:
            raise HTTPException(404, f"no run {run_id!r}") from None
        stored = self.client.store.get_run(run_id)
        parents = {} if stored is None else {s.name: s.parents for s in stored.steps}
        nodes = [
            DagNode(name, step.status.value, parents.get(name, ()), step.attempts)
            for name, step in info.steps.items()
        ]
        errors = None
        if Cap.ERROR_HISTORY in self.client.capabilities:
            errors = self.client.errors(run_id)
        return self.render(
            request,
            "run.html",
            info=info,
            dag=dag_svg(nodes),
            errors=errors,
            can_retry=Cap.RETRY_RUN in self.client.capabilities,
            can_delete=Cap.DELETE_RUN in self.client.capabilities,
        )

    @requires("read")
    def queues(self, request: Request) -> Response:
        context: dict[str, Any] = {"queues": [], "unsupported": None, "pauses": {}}
        try:
            self._needs(Cap.STATS, "queue counts cannot be read")
            figures = self.client.stats(hours=1.0)
            context["queues"] = list(figures.queues)
            context["figures"] = figures
        except _Unsupported as error:
            context["unsupported"] = str(error)
        caps = self.client.capabilities
        context["can_pause"] = Cap.PAUSE_QUEUE in caps
        if Cap.PAUSE_QUEUE in caps or Cap.PAUSE_WORKFLOW in caps:
            context["pauses"] = {
                p.name: p.paused_at for p in self.client.pauses() if p.kind is PauseKind.QUEUE
            }
            listed = {q.queue for q in context["queues"]}
            context["paused_only"] = sorted(set(context["pauses"]) - listed)
        else:
            context["paused_only"] = []
        return self.render(request, "queues.html", **context)

    @requires("read")
    def schedules(self, request: Request) -> Response:
        context: dict[str, Any] = {"schedules": [], "history": {}, "unsupported": None}
        try:
            self._needs(Cap.SCHEDULE_LIST, "schedules cannot be listed")
            found = self.client.schedules()
            context["schedules"] = found
            if Cap.SCHEDULE_HISTORY in self.client.capabilities:
                context["history"] = {
                    info.id: self.client.schedule_history(info.workflow, info.name, limit=5)
                    for info in found
                }
        except _Unsupported as error:
            context["unsupported"] = str(error)
        caps = self.client.capabilities
        context["can_pause"] = Cap.SCHEDULE_PAUSE in caps
        context["can_trigger"] = Cap.SCHEDULE_TRIGGER in caps
        context["registered"] = set(self.client.workflows)
        return self.render(request, "schedules.html", **context)

    @requires("read")
    def servers(self, request: Request) -> Response:
        context: dict[str, Any] = {"listing": None, "unsupported": None, "subscriptions": None}
        try:
            self._needs(Cap.SERVERS, "servers cannot be listed")
            context["listing"] = self.client.servers(hours=24.0)
        except _Unsupported as error:
            context["unsupported"] = str(error)
        if Cap.LIFECYCLE in self.client.capabilities:
            # Durable: a subscription no running client serves shows as a growing backlog.
            context["subscriptions"] = self.client.lifecycle_subscriptions()
        return self.render(request, "servers.html", **context)

    @requires("read")
    def throughput(self, request: Request) -> Response:
        window = request.query_params.get("window", "1h")
        if window not in _WINDOWS:
            window = "1h"
        hours, bucket = _WINDOWS[window]
        context: dict[str, Any] = {
            "chart": "", "unsupported": None, "window": window, "windows": list(_WINDOWS),
            "bucket": bucket, "succeeded": 0, "failed": 0,
        }  # fmt: skip
        try:
            self._needs(Cap.STATS, "throughput cannot be read")
            figures = self.client.stats(hours=hours, bucket=bucket)
            context["chart"] = throughput_svg(figures.throughput, figures.width)
            context["succeeded"] = sum(b.succeeded for b in figures.throughput)
            context["failed"] = sum(b.failed for b in figures.throughput)
        except _Unsupported as error:
            context["unsupported"] = str(error)
        return self.render(request, "throughput.html", **context)

    # -- actions -----------------------------------------------------------------------------

    def _act(self, request: Request, back: str, act: Callable[[], str]) -> Response:
        """Do ``act``; back to ``back``, whose next rendering says what happened (or why not).

        The notice travels in the signed session, not in the URL: a link cannot put
        words of its own in the dashboard's mouth.
        """
        try:
            notice = act()
        except (cf.CairnError, ValueError, LookupError) as error:  # Unsupported is a CairnError
            notice = f"not done: {error}"
        request.session[_NOTICE] = notice
        return RedirectResponse(back, status_code=303)

    @requires("act")
    def retry(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def act() -> str:
            done = self.client.retry_run(run_id)
            return "retried" if done else "not retried: the run has not finished, or succeeded"

        return self._act(request, f"/runs/{run_id}", act)

    @requires("act")
    def cancel(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def act() -> str:
            return "cancelled" if self.client.cancel(run_id) else "not cancelled: it had finished"

        return self._act(request, f"/runs/{run_id}", act)

    @requires("act")
    def delete(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        deleted = 0

        def act() -> str:
            nonlocal deleted
            deleted = self.client.delete_runs(run_id)
            return f"run {run_id} deleted" if deleted else "not deleted: cancel it first"

        response = self._act(request, f"/runs/{run_id}", act)
        # Deleted: the run's page is gone, so back to the list (the notice is the same).
        return RedirectResponse("/runs", status_code=303) if deleted else response

    @requires("act")
    def queue_act(self, request: Request) -> Response:
        name = request.path_params["name"]
        act = request.path_params["act"]
        if act not in ("pause", "resume"):
            raise HTTPException(404, f"no action {act!r}")

        def do() -> str:
            if act == "pause":
                return f"queue {name} paused" if self.client.pause_queue(name) else "already paused"
            return f"queue {name} resumed" if self.client.resume_queue(name) else "not paused"

        return self._act(request, "/queues", do)

    @requires("act")
    def schedule_act(self, request: Request) -> Response:
        workflow = request.path_params["workflow"]
        name = request.path_params["name"]
        act = request.path_params["act"]
        client = self.client

        def do() -> str:
            if act == "pause":
                client.pause_schedule(workflow, name)
                return f"schedule {workflow}/{name} paused"
            if act == "resume":
                client.resume_schedule(workflow, name)
                return f"schedule {workflow}/{name} resumed"
            if act == "trigger":
                ref = client.trigger_schedule(workflow, name)
                return f"schedule {workflow}/{name} triggered: run {ref.id}"
            raise HTTPException(404, f"no action {act!r}")

        return self._act(request, "/schedules", do)


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _safe_next(target: str) -> str:
    """Only a path of this site: never another host (``//evil``, ``https://...``)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/runs"
    return target


def route_paths(app: Starlette) -> Iterable[tuple[str, frozenset[str]]]:
    """Every route's path and methods, for tests that must not miss a new one."""
    for route in app.routes:
        if isinstance(route, Route):
            yield route.path, frozenset(route.methods or ())
        elif isinstance(route, Mount):
            yield route.path, frozenset({"GET"})
