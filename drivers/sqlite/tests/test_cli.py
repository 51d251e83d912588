"""The ``cairn`` command line as a new user meets it: real processes on a real SQLite file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import cairnflow as cf

FLOWS = """
import cairnflow as cf

echo = cf.Workflow("cli-echo", steps=[cf.Step("echo", lambda ctx, data: data)])
echo.schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin", payload={"kind": "full"})
workflows = [echo]
"""


def cairn(
    *args: str, cwd: Path | None = None, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": ""}
    return subprocess.run(
        [sys.executable, "-m", "cairnflow", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )


def test_run_ids_are_never_cut_at_80_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    wf = cf.Workflow("a-rather-long-workflow-name", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store)
    client.register(wf)
    ref = client.enqueue(wf, {"x": 1}, labels={"tenant": "acme"})
    store.close()
    listed = cairn("runs", url)
    assert listed.returncode == 0, listed.stderr
    assert ref.id in listed.stdout  # whole, so it can be pasted into `cairn show`
    shown = cairn("show", url, ref.id)
    assert shown.returncode == 0, shown.stderr
    assert ref.id in shown.stdout


def test_show_prints_the_step_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    calls: list[int] = []

    def flaky(ctx: cf.StepContext, data: object) -> str:
        calls.append(ctx.attempt)
        if len(calls) < 2:
            raise RuntimeError("once")
        return "ok"

    quick = cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, max=0.01))
    wf = cf.Workflow("cli-history", steps=[cf.Step("flaky", flaky, retry=quick)])
    with cf.Client(store, node_id="cli-node", poll_interval=0.05) as client:
        client.register(wf)
        ref = client.enqueue(wf, None)
        assert client.wait(ref, timeout=30).status is cf.Status.SUCCEEDED
    store.close()
    shown = cairn("show", url, ref.id)
    assert shown.returncode == 0, shown.stderr
    history = shown.stdout.rsplit("history", 1)[1]  # the table after the steps'
    lines = [line for line in history.splitlines() if "cli-node" in line]
    events = [
        word
        for line in lines
        for word in line.split()
        if word in {"claimed", "retried", "succeeded"}
    ]
    assert events == ["claimed", "retried", "claimed", "succeeded"], shown.stdout
    # The step that failed once and then succeeded shows its output, never the old error.
    steps = shown.stdout.rsplit("history", 1)[0]
    assert "'ok'" in steps, shown.stdout
    assert "once" not in steps, shown.stdout


def test_show_marks_skipped_steps_and_compensations(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    wf = cf.Workflow("cli-saga")
    wf.step(lambda c, d: "charged", name="charge")

    @wf.step(after=["charge"])
    def ship(ctx: cf.StepContext, data: object) -> None:
        raise cf.Permanent("no courier")

    wf.compensation(for_="charge", name="refund")(lambda c, d: f"refunded, {d}")
    wf.compensation(for_="ship", name="recall")(lambda c, d: d)
    with cf.Client(store, poll_interval=0.05) as client:
        client.register(wf)
        ref = client.enqueue(wf, None)
        assert client.wait(ref, timeout=30).status is cf.Status.FAILED
    store.close()
    # Wide enough for each step's row on one line (at 80 columns the output column folds).
    shown = cairn("show", url, ref.id, columns=200)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[1]: line for line in shown.stdout.splitlines() if line.startswith("│ ")}
    assert "compensation" in rows["refund"], shown.stdout
    assert "refunded" in rows["refund"], shown.stdout
    assert "skipped" in rows["recall"], shown.stdout
    assert "not run" in rows["recall"], shown.stdout
    assert "compensating: the run failed and ran" in shown.stdout, shown.stdout


def test_show_prints_step_timings_and_json(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()

    def flaky(ctx: cf.StepContext, data: object) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("once")
        return "ok"

    quick = cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, max=0.01))
    wf = cf.Workflow("cli-timed")
    first = wf.step(lambda ctx, data: {"got": data}, name="first")
    wf.step(flaky, name="flaky", after=[first], retry=quick)
    with cf.Client(store, node_id="cli-node", poll_interval=0.05) as client:
        client.register(wf)
        ref = client.enqueue(wf, {"n": 1}, key="timed-1", headers={"trace": "t-1"})
        info = client.wait(ref, timeout=30)
        assert info.status is cf.Status.SUCCEEDED
        history = client.step_history(ref)
    store.close()

    shown = cairn("show", url, ref.id, "--json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert (run["id"], run["workflow"], run["status"]) == (ref.id, "cli-timed", "succeeded")
    assert (run["payload"], run["key"], run["headers"]) == ({"n": 1}, "timed-1", {"trace": "t-1"})
    assert run["result"] == "ok" and run["error"] is None
    assert run["finished_at_ns"] == info.finished_at_ns
    for name, step in info.steps.items():
        printed = run["steps"][name]
        assert printed["started_at_ns"] == step.started_at_ns is not None
        assert printed["finished_at_ns"] == step.finished_at_ns is not None
        assert printed["duration_ns"] == step.finished_at_ns - step.started_at_ns
        assert (printed["attempts"], printed["status"]) == (step.attempts, "succeeded")
    assert run["steps"]["first"]["output"] == {"got": {"n": 1}}
    assert run["steps"]["flaky"]["attempts"] == 2
    assert run["steps"]["flaky"]["failures"] == 1
    events = [(e["step"], e["attempt"], e["event"]) for e in run["history"]]
    assert events == [(e.step, e.attempt, e.event) for e in history]
    assert ("flaky", 1, "retried") in events

    table = cairn("show", url, ref.id)
    assert table.returncode == 0, table.stderr
    for name in ("first", "flaky"):
        step = info.steps[name]
        assert step.started_at_ns is not None
        started = cf.clock.from_ns(step.started_at_ns).strftime("%H:%M:%S.%f")[:-3]
        assert started in table.stdout, table.stdout
    assert "took" in table.stdout
    assert re.search(r"\d\.\d ms|\d\.\d\d s", table.stdout), table.stdout  # a duration


def test_show_prints_a_runs_headers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    wf = cf.Workflow("headed", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store)
    client.register(wf)
    ref = client.enqueue(wf, 1, headers={"traceparent": "00-abc-def-01", "tenant": "[acme]"})
    bare = client.enqueue(wf, 2)
    store.close()
    shown = cairn("show", url, ref.id)
    assert shown.returncode == 0, shown.stderr
    assert "headers: {'traceparent': '00-abc-def-01', 'tenant': '[acme]'}" in shown.stdout
    plain = cairn("show", url, bare.id)
    assert plain.returncode == 0, plain.stderr
    assert "headers" not in plain.stdout


def test_a_run_is_enqueued_for_a_tenant_listed_by_it_and_shown_with_it(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    app = ("--app", "flows:workflows")
    made = cairn("enqueue", url, "cli-echo", *app, "--payload", '{"n": 1}', "--tenant", "acme",
                 cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    acme = made.stdout.strip()
    bare = cairn("enqueue", url, "cli-echo", *app, cwd=tmp_path).stdout.strip()
    listed = cairn("runs", url, "--tenant", "acme", "--count", "--json")
    assert listed.returncode == 0, listed.stderr
    *rows, tail = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["tenant"]) for r in rows] == [(acme, "acme")]
    assert tail == {"cursor": None, "total": 1}
    table = cairn("runs", url, "--tenant", "acme")  # a run id is never cut at 80 columns
    assert acme in table.stdout and bare not in table.stdout
    shown = cairn("show", url, acme)
    assert shown.returncode == 0, shown.stderr
    assert "tenant: acme" in shown.stdout
    assert "{'n': 1}" in shown.stdout
    assert "tenant" not in cairn("show", url, bare).stdout
    assert json.loads(cairn("show", url, acme, "--json").stdout)["tenant"] == "acme"
    bad = cairn("enqueue", url, "cli-echo", *app, "--tenant", "no good", cwd=tmp_path)
    assert bad.returncode == 1
    assert "invalid tenant name 'no good'" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stderr
    refused = cairn("runs", url, "--tenant", "no good")
    assert refused.returncode == 2
    assert "invalid tenant name" in refused.stderr


def test_runs_are_filtered_counted_and_paged_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    wf = cf.Workflow("listed", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store)
    client.register(wf)
    refs = [client.enqueue(wf, n, labels={"tenant": f"acme-{n}"}) for n in range(12)]
    other = client.enqueue(wf, 99, labels={"tenant": "zeta"}, queue="slow")
    store.close()
    listed = cairn("runs", url, "--label-prefix", "tenant=acme-1", "--count", "--json")
    assert listed.returncode == 0, listed.stderr
    *rows, tail = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in rows] == [refs[11].id, refs[10].id, refs[1].id]
    assert tail == {"cursor": None, "total": 3}
    assert rows[0]["status"] == "queued"
    first = cairn("runs", url, "--status", "queued", "--limit", "5", "--json", "--since", "1h")
    *page, tail = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(page) == 5
    assert tail["cursor"] is not None
    rest = cairn("runs", url, "--status", "queued", "--limit", "50", "--cursor", tail["cursor"])
    assert rest.returncode == 0, rest.stderr
    assert refs[0].id in rest.stdout
    assert other.id not in rest.stdout
    by_queue = cairn("runs", url, "--queue", "slow", "--label", "tenant=zeta", "--json")
    assert json.loads(by_queue.stdout.splitlines()[0])["id"] == other.id
    bad = cairn("runs", url, "--status", "finished")
    assert bad.returncode == 2
    assert "unknown run status 'finished'" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert cairn("runs", url, "--label-prefix", "tenant").returncode == 2


def test_stats_are_printed_for_people_and_scripts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    wf = cf.Workflow("counted", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store)
    client.register(wf)
    for n in range(3):
        client.enqueue(wf, n, queue="mail")
    store.close()
    shown = cairn("stats", url)
    assert shown.returncode == 0, shown.stderr
    assert "mail" in shown.stdout
    figures = json.loads(cairn("stats", url, "--json", "--hours", "2").stdout)
    (mail,) = figures["queues"]
    assert (mail["queue"], mail["queued"], mail["running"]) == ("mail", 3, 0)
    assert len(figures["throughput"]) == 120
    assert cairn("stats", url, "--bucket", "0").returncode == 2
    assert cairn("servers", url).returncode == 1  # no client is live
    store = cf.open_store(url)
    with cf.Client(store, queues=["mail"]) as worker:
        worker.register(wf)
        listed = cairn("servers", url, "--json")
        assert listed.returncode == 0, listed.stderr
        (live,) = json.loads(listed.stdout)["live"]
        assert (live["node"], live["queues"]) == (worker.node_id, ["mail"])
    store.close()


def test_reading_a_prefix_never_migrated_says_so_without_a_traceback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    never = [["runs", url], ["show", url, "run_0"], ["pauses", url], ["retry", url, "run_0"]]
    never += [["cancel", url, "run_0"], ["delete", url, "run_0"]]
    never += [
        [verb, kind, url, "q"] for verb in ("pause", "resume") for kind in ("queue", "workflow")
    ]
    for command in never:
        result = cairn(*command, "-o", "table_prefix=never_")
        assert result.returncode == 1
        output = result.stdout + result.stderr
        assert "never migrated" in output and "cairn migrate URL" in output
        assert "Traceback" not in output


def test_the_worker_imports_its_app_from_the_current_directory_and_names_its_tables(
    tmp_path: Path,
) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url, "-o", "table_prefix=app_").returncode == 0
    command = ["worker", url, "--app", "flows:workflows", "-o", "table_prefix=app_"]
    worker = subprocess.Popen(
        [sys.executable, "-m", "cairnflow", *command, "--poll-interval", "0.1"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        banner = worker.stdout.readline()
        assert "running cli-echo" in banner, banner
        assert "(tables app_*)" in banner, banner
    finally:
        worker.send_signal(signal.SIGTERM)
        # Generous: once in a CI run (2026-12-02) this worker took over 30 s to exit after
        # SIGTERM with nothing to drain; not reproduced since (see the issue note).
        worker.wait(timeout=120)
    assert worker.returncode == 0


def test_schedules_are_listed_paused_resumed_and_triggered(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    store = cf.open_store(url)
    client = cf.Client(store)
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(FLOWS), namespace)  # the same declaration the worker would load
    client.register(*namespace["workflows"])  # type: ignore[misc]
    client.start()  # records the declared schedule
    client.stop()
    store.close()
    assert "nightly" in cairn("schedules", url).stdout  # a bare URL lists
    listed = cairn("schedules", "list", url, "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["workflow"], row["name"], row["tz"], row["paused"]) == (
        "cli-echo",
        "nightly",
        "Europe/Berlin",
        False,
    )
    assert cairn("schedules", "pause", url, "cli-echo", "nightly").returncode == 0
    (row,) = [
        json.loads(line) for line in cairn("schedules", "list", url, "--json").stdout.splitlines()
    ]
    assert row["paused"] is True
    assert cairn("schedules", "resume", url, "cli-echo", "nightly").returncode == 0
    fired = cairn(
        "schedules", "trigger", url, "cli-echo", "nightly", "--app", "flows:workflows", cwd=tmp_path
    )
    assert fired.returncode == 0, fired.stdout + fired.stderr
    run_id = fired.stdout.strip()
    shown = cairn("show", url, run_id)
    assert shown.returncode == 0 and "cli-echo" in shown.stdout
    missing = cairn("schedules", "pause", url, "cli-echo", "weekly")
    assert missing.returncode == 1
    assert "no stored schedule named 'weekly'" in missing.stdout + missing.stderr


QUEUED = """
import cairnflow as cf

mail = cf.Workflow("cli-mail", queue="mail", steps=[cf.Step("send", lambda ctx, data: ctx.queue)])
workflows = [mail]
"""


def test_queues_and_workflows_are_paused_listed_and_resumed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    assert "paused queue mail" in cairn("pause", "queue", url, "mail").stdout
    assert "was paused" in cairn("pause", "queue", url, "mail").stdout  # a second: no change
    assert "paused workflow cli-mail" in cairn("pause", "workflow", url, "cli-mail").stdout
    listed = cairn("pauses", url, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["kind"], r["name"]) for r in rows] == [("queue", "mail"), ("workflow", "cli-mail")]
    assert all(isinstance(r["paused_at_ns"], int) for r in rows)
    table = cairn("pauses", url)
    assert table.returncode == 0 and "mail" in table.stdout and "cli-mail" in table.stdout
    # What the commands wrote is what every client's claim reads.
    store = cf.open_store(url)
    try:
        held = [(p.kind.value, p.name) for p in cf.Client(store).pauses()]
    finally:
        store.close()
    assert held == [("queue", "mail"), ("workflow", "cli-mail")]
    assert "resumed queue mail" in cairn("resume", "queue", url, "mail").stdout
    assert "was not paused" in cairn("resume", "queue", url, "mail").stdout
    assert "resumed workflow" in cairn("resume", "workflow", url, "cli-mail").stdout
    assert cairn("pauses", url, "--json").stdout == ""


def test_a_worker_serves_the_queues_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(QUEUED))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    store = cf.open_store(url)
    client = cf.Client(store)
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(QUEUED), namespace)
    client.register(*namespace["workflows"])  # type: ignore[misc]
    ref = client.enqueue("cli-mail", {})
    command = ["worker", url, "--app", "flows:workflows", "--queues", "mail:1,default"]
    worker = subprocess.Popen(
        [sys.executable, "-m", "cairnflow", *command, "--poll-interval", "0.1"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        banner = worker.stdout.readline()
        assert "running cli-mail (mail, default)" in banner, banner
        info = client.wait(ref, timeout=30)
        assert (info.status, info.result) == (cf.Status.SUCCEEDED, "mail")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        store.close()
    assert worker.returncode == 0


def test_an_invalid_queues_option_is_refused_with_status_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    bad = {
        "mail:0": "workers must be an int >= 1",
        "mail,mail": "queue 'mail' is configured twice",
        "bad name!": "invalid queue name 'bad name!'",
        "mail,,default": "invalid queue name ''",
    }
    for value, message in bad.items():
        result = cairn("worker", url, "--app", "flows:workflows", "--queues", value)
        assert result.returncode == 2, (value, result.stdout, result.stderr)
        assert "Invalid value for '--queues'" in result.stderr and message in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "flows.db").exists()  # refused before the store was opened


def test_a_run_is_forced_rescheduled_and_the_next_due_time_read(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(
        textwrap.dedent(FLOWS).replace('echo.schedule("nightly"', 'dict(name="nightly"')
    )
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    store = cf.open_store(url)
    client = cf.Client(store)
    client.register(cf.Workflow("cli-echo", steps=[cf.Step("echo", lambda ctx, data: data)]))
    ref = client.enqueue("cli-echo", 1, delay=7200)
    stored = store.get_run(ref.id)
    assert stored is not None
    due_at = stored.steps[0].due_at
    delayed = cairn("due", url, "--app", "flows:workflows", cwd=tmp_path)
    assert delayed.stdout.strip().endswith(f"({due_at})"), delayed.stdout + delayed.stderr
    forced = cairn("run", "force", url, ref.id)
    assert (forced.returncode, forced.stdout.strip()) == (0, f"forced {ref.id}"), forced.stderr
    assert cairn("due", url, "--app", "flows:workflows", cwd=tmp_path).stdout.strip() == "now"
    moved = cairn("run", "reschedule", url, ref.id, "--at", "4102444800000000000")
    assert (moved.returncode, moved.stdout.strip()) == (0, f"rescheduled {ref.id}"), moved.stderr
    due = cairn("due", url, "--app", "flows:workflows", cwd=tmp_path)
    assert due.stdout.strip() == "2100-01-01T00:00:00+00:00 (4102444800000000000)", due.stderr
    assert store.get_run(ref.id).run_at == 4102444800000000000  # type: ignore[union-attr]
    refused = cairn("run", "reschedule", url, ref.id, "--at", "1", "--delay", "1")
    assert refused.returncode == 1 and "exactly one of at=" in refused.stdout + refused.stderr
    unknown = cairn("run", "force", url, "run_nosuchrun")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stdout + unknown.stderr
    other = cairn("due", url, "--app", "flows:workflows", "--queues", "other", cwd=tmp_path)
    assert other.stdout.strip() == "nothing pending", other.stdout + other.stderr
    store.close()


def test_runs_are_retried_cancelled_and_deleted_with_exit_statuses_scripts_can_test(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    wf = cf.Workflow("cli-admin", steps=[cf.Step("a", lambda ctx, data: data)])
    wf.step(lambda ctx, data: data, name="b", after=["a"])
    store = cf.open_store(url)
    try:
        client = cf.Client(store)
        client.register(wf)
        first = client.enqueue("cli-admin", 1, labels={"team": "x"})
        second = client.enqueue("cli-admin", 2, labels={"team": "x"})
        third = client.enqueue("cli-admin", 3, labels={"team": "y"})
    finally:
        store.close()
    retried = cairn("retry", url, first.id)
    assert retried.returncode == 1, "a run still queued is not retried"
    assert "was not retried" in retried.stdout
    stepped = cairn("cancel", url, third.id, "--step", "a")
    assert stepped.returncode == 0, stepped.stderr
    assert "cancelled step a" in stepped.stdout
    cancelled = cairn("cancel", url, "--workflow", "cli-admin", "--label", "team=x", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout) == {"cancelled": 2}
    assert cairn("cancel", url, first.id).returncode == 1  # finished already
    assert cairn("retry", url, first.id).returncode == 0
    deleted = cairn("delete", url, second.id, first.id, "--json")
    assert json.loads(deleted.stdout) == {"deleted": 1}, "an unfinished run was deleted"
    assert cairn("delete", url, "--status", "cancelled").stdout.startswith("deleted 1 run")
    assert cairn("delete", url, second.id).returncode == 1  # gone already
    assert cairn("cancel", url).returncode == 2  # neither a run nor a filter: a usage error
    store = cf.open_store(url)
    try:
        left = {run.id: run.status for run in cf.Client(store).runs().runs}
    finally:
        store.close()
    assert left == {first.id: cf.Status.QUEUED}


def test_a_signal_is_sent_from_the_command_line_and_its_outcome_is_told(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    assert cairn("migrate", url).returncode == 0
    wf = cf.Workflow("cli-signal")
    wf.wait("approval", signal="approved", timeout=3600)
    store = cf.open_store(url)
    try:
        client = cf.Client(store)
        client.register(wf)
        ref = client.enqueue("cli-signal", None)
        other = client.enqueue("cli-signal", None)
    finally:
        store.close()
    bad = cairn("signal", url, ref.id, "approved", "--payload", "{not json")
    assert bad.returncode == 2
    assert "--payload" in bad.stderr and "not JSON" in bad.stderr
    sent = cairn("signal", url, ref.id, "approved", "--payload", '{"by": "ops"}', "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) == {"run": ref.id, "signal": "approved", "outcome": "stored"}
    assert cairn("cancel", url, other.id).returncode == 0
    late = cairn("signal", url, other.id, "approved")
    assert late.returncode == 1
    assert "had finished" in late.stdout
    store = cf.open_store(url)
    try:
        client = cf.Client(store)
        client.register(wf)
        with client:  # the stored signal resolves the wait once a worker reaches it
            info = client.wait(ref, timeout=60)
    finally:
        store.close()
    assert info.status is cf.Status.SUCCEEDED
    assert info.steps["approval"].output == {"by": "ops"}


def test_lifecycle_lists_the_subscriptions_and_drops_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    assert isinstance(store, cf.store.Lifecycle)
    store.subscribe_lifecycle("events", "", 1_000)
    store.subscribe_lifecycle("on_failure", "cli-echo", 2_000)
    store.close()
    listed = cairn("lifecycle", url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"channel": "events", "workflow": None, "since_ns": 1_000, "backlog": 0, "oldest_ns": None},
        {
            "channel": "on_failure",
            "workflow": "cli-echo",
            "since_ns": 2_000,
            "backlog": 0,
            "oldest_ns": None,
        },
    ]
    table = cairn("lifecycle", "list", url, columns=120)
    assert table.returncode == 0, table.stderr
    assert "(every workflow)" in table.stdout
    assert "cli-echo" in table.stdout
    dropped = cairn("lifecycle", "drop", url, "events")
    assert dropped.returncode == 0, dropped.stderr
    assert "dropped the subscription events of every workflow" in dropped.stdout
    again = cairn("lifecycle", "drop", url, "events")
    assert again.returncode == 1
    assert "no lifecycle subscription events of every workflow" in again.stderr
    wrong = cairn("lifecycle", "drop", url, "event", "cli-echo")
    assert wrong.returncode == 2
    assert "'event' is not one of 'events', 'on_failure'" in wrong.stderr
    store = cf.open_store(url)
    try:
        remaining = cf.Client(store).lifecycle_subscriptions()
    finally:
        store.close()
    assert [(sub.channel, sub.workflow) for sub in remaining] == [("on_failure", "cli-echo")]
