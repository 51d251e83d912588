"""Secure by default: no route answers without credentials, no POST without its CSRF token,
no action in read-only mode, no start without credentials.

Routes are enumerated from the application's router (:func:`route_paths`), so a
route added later is checked without anyone remembering to add it here.
"""

from __future__ import annotations

import re

import flows
import pytest
from cairnflow_dashboard import (
    PUBLIC_PATHS,
    Credentials,
    DashboardSettings,
    MissingCredentials,
    create_app,
    credentials_from_env,
    route_paths,
)
from conftest import CREDENTIALS, PASSWORD, TOKEN, USER, csrf
from starlette.testclient import TestClient

import cairnflow as cf

ACTIONS_OK = (303, 404)
"""What an accepted request to an action answers: a redirect, or 404 for the made-up ids."""


def _app(*, read_only: bool = False) -> TestClient:
    client = cf.Client(cf.MemoryStore())
    app = create_app(
        client,
        DashboardSettings(credentials=CREDENTIALS, read_only=read_only, workflows=flows.build()),
    )
    return TestClient(app, follow_redirects=False)


def _concrete(path: str) -> str:
    """A route path with its parameters filled in (``{run_id}`` -> ``x1``)."""
    return re.sub(r"\{[^}]+\}", "x1", path) if path != "/static" else "/static/dashboard.css"


def _routes(web: TestClient) -> list[tuple[str, str]]:
    found = []
    for path, methods in route_paths(web.app):  # type: ignore[arg-type]
        for method in sorted(methods - {"HEAD"}):
            found.append((method, _concrete(path)))
    return found


def _is_public(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_PATHS)


def test_the_router_has_the_routes_we_think() -> None:
    routes = _routes(_app())
    assert ("POST", "/runs/x1/retry") in routes
    assert ("GET", "/throughput") in routes
    assert ("POST", "/queues/x1/x1") in routes
    assert len(routes) >= 16
    assert {"/login", "/static"} == PUBLIC_PATHS


@pytest.mark.parametrize(
    ("method", "path"), [(m, p) for m, p in _routes(_app()) if not _is_public(p)]
)
def test_every_route_refuses_without_credentials(method: str, path: str) -> None:
    web = _app()
    answer = web.request(method, path, data={"csrftoken": "whatever"} if method == "POST" else None)
    assert answer.status_code in (401, 403), (method, path, answer.status_code)
    assert "card declined" not in answer.text and "orders" not in answer.text
    wrong = web.request(method, path, headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401
    basic = web.request(method, path, headers={"Authorization": "Basic b3BzOnNlY3JldA=="})
    assert basic.status_code == 401  # HTTP Basic is not accepted (see _auth's docstring)


def test_the_public_routes_show_nothing_of_the_store() -> None:
    web = _app()
    public = {(m, p) for m, p in _routes(web) if _is_public(p)}
    assert public == {("GET", "/login"), ("POST", "/login"), ("GET", "/static/dashboard.css")}
    assert web.get("/login").status_code == 200
    assert "orders" not in web.get("/login").text
    css = web.get("/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p in _routes(_app()) if m == "POST"])
def test_every_post_refuses_a_bad_csrf_token(method: str, path: str) -> None:
    web = _app()
    web.get("/login")
    web.post("/login", data={"user": USER, "password": PASSWORD, "csrftoken": csrf(web)})
    good = csrf(web)
    bad = web.post(path, data={"csrftoken": good[:-3] + "xyz"})
    assert bad.status_code == 403, (path, bad.status_code)
    missing = web.post(path, data={})
    assert missing.status_code == 403
    header_only = web.post(path, headers={"x-csrftoken": "forged"})
    assert header_only.status_code == 403
    if path == "/login":
        return  # signing in with the right token: test_login_refuses_wrong_credentials...
    accepted = web.post(path, data={"csrftoken": good})
    assert accepted.status_code in ACTIONS_OK, (path, accepted.status_code, accepted.text)


@pytest.mark.parametrize(
    ("method", "path"),
    [(m, p) for m, p in _routes(_app()) if m == "POST" and p not in ("/login", "/logout")],
)
def test_read_only_refuses_every_action(method: str, path: str) -> None:
    web = TestClient(_app(read_only=True).app, follow_redirects=False)
    web.get("/login")
    web.post("/login", data={"user": USER, "password": PASSWORD, "csrftoken": csrf(web)})
    answer = web.post(path, data={"csrftoken": csrf(web)})
    assert answer.status_code == 403, (path, answer.status_code)
    page = web.get("/runs")
    assert page.status_code == 200 and "read-only" in page.text


def test_a_script_uses_the_bearer_token() -> None:
    web = _app()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert web.get("/runs", headers=auth).status_code == 200
    # No browser sends this header by itself, so no CSRF token is asked for (asgi-csrf's rule).
    assert web.post("/queues/default/pause", headers=auth).status_code == 303


def test_login_refuses_wrong_credentials_and_keeps_next_on_this_site() -> None:
    web = _app()
    web.get("/login")
    wrong = web.post("/login", data={"user": USER, "password": "nope-nope", "csrftoken": csrf(web)})
    assert wrong.status_code == 401 and "not accepted" in wrong.text
    assert web.get("/runs").status_code == 401
    away = web.post(
        "/login",
        data={"user": "x", "password": TOKEN, "next": "//evil.example/", "csrftoken": csrf(web)},
    )
    assert away.status_code == 303 and away.headers["location"] == "/runs"
    assert web.get("/runs").status_code == 200
    web.post("/logout", data={"csrftoken": csrf(web)})
    assert web.get("/runs").status_code == 401


def test_no_credentials_no_dashboard() -> None:
    with pytest.raises(MissingCredentials, match="CAIRNFLOW_DASHBOARD_TOKEN"):
        credentials_from_env({})
    with pytest.raises(MissingCredentials, match="both"):
        credentials_from_env(
            {"CAIRNFLOW_DASHBOARD_TOKEN": "a-long-token", "CAIRNFLOW_DASHBOARD_USER": "u"}
        )
    with pytest.raises(MissingCredentials, match="at least"):
        Credentials(token="short")
    assert (
        credentials_from_env({"CAIRNFLOW_DASHBOARD_TOKEN": "a-long-token"}).token == "a-long-token"
    )


def test_a_started_client_is_refused() -> None:
    client = cf.Client(cf.MemoryStore())
    client.start()
    try:
        with pytest.raises(ValueError, match="not started"):
            create_app(client, DashboardSettings(credentials=CREDENTIALS))
    finally:
        client.stop()


def test_a_link_cannot_put_words_on_a_page() -> None:
    web = _app()
    web.get("/login")
    web.post("/login", data={"user": USER, "password": PASSWORD, "csrftoken": csrf(web)})
    page = web.get("/runs", params={"notice": "session expired, sign in at evil.example"})
    assert page.status_code == 200 and "evil.example" not in page.text
    marked = web.get("/runs", params={"workflow": "<script>alert(1)</script>"})
    assert "<script>alert(1)</script>" not in marked.text
    assert "&lt;script&gt;" in marked.text
