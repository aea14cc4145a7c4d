"""``Settings``: every ``REACTOR_*`` variable, read once, typed, checked, masked when shown."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor import TemplateError, agent, reactive
from reactor._signals.settings import (
    Settings,
    database_location,
    masked_url,
    settings,
    unknown_variables,
)
from reactor.exceptions import ServiceConfigError

REPO = Path(__file__).parents[2]

DEFAULTS: dict[str, Any] = {
    "REACTOR_DB": ".reactor/runs.db",
    "REACTOR_SERVICE_DB": "sqlite:///.reactor/app.db",
    "REACTOR_REDIS_URL": None,
    "REACTOR_REDIS_PREFIX": "reactor",
    "REACTOR_RECLAIM_AFTER": 30.0,
    "REACTOR_RETENTION": None,
    "REACTOR_API_TOKENS": None,
    "REACTOR_API_TOKENS_FILE": None,
    "REACTOR_ALLOWED_HOSTS": (),
    "REACTOR_MAX_BODY": 1_048_576,
    "REACTOR_STREAM_BUFFER": 1000,
    "REACTOR_MAX_STREAMS": 256,
    "REACTOR_MAX_STREAMS_PER_USER": 16,
    "REACTOR_STREAM_WRITE_TIMEOUT": 30.0,
    "REACTOR_MAX_REASON": 4096,
    "REACTOR_AUTH": "tokens",
    "REACTOR_JWT_JWKS_URL": None,
    "REACTOR_JWT_PUBLIC_KEY": None,
    "REACTOR_JWT_AUDIENCE": None,
    "REACTOR_JWT_ISSUER": None,
    "REACTOR_JWT_ROLES_CLAIM": "roles",
    "REACTOR_METRICS_PUBLIC": False,
    "REACTOR_OTEL": False,
    "REACTOR_OTEL_CAPTURE_CONTENT": False,
    "REACTOR_MAX_TEMPLATE_CHARS": 4_000_000,
    "REACTOR_HANDLER_THREADS": 32,
    "REACTOR_SPEND_CAP_USD": None,
    "REACTOR_SPEND_CAP_PER": timedelta(hours=1),
    "REACTOR_AUDIT_KEY": None,
    "REACTOR_AUDIT_CHAIN": True,
}
"""Every variable and its default: the list docs/configuration.md documents."""


def field(variable: str) -> str:
    return variable.removeprefix("REACTOR_").lower()


def test_every_variable_has_its_documented_default() -> None:
    config = Settings.from_environ({})
    assert [Settings.variable(name) for name in Settings.model_fields] == list(DEFAULTS)
    assert {name: getattr(config, field(name)) for name in DEFAULTS} == DEFAULTS


def test_docs_configuration_lists_every_variable_with_its_default() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    rows = {
        cells[0].strip("` "): cells
        for line in text.splitlines()
        if line.startswith("| `REACTOR_")
        for cells in [line.strip("|").split("|")]
    }
    assert set(rows) == set(DEFAULTS)
    config = Settings.from_environ({})
    for name in DEFAULTS:
        assert config.shown(field(name)).split(" ")[0] in rows[name][2], name


@pytest.mark.parametrize(
    ("variable", "text", "value"),
    [
        pytest.param("REACTOR_DB", "sqlite:///runs.db", "sqlite:///runs.db", id="db-url"),
        pytest.param("REACTOR_SERVICE_DB", "postgresql://h/app", "postgresql://h/app", id="pg"),
        pytest.param("REACTOR_SERVICE_DB", "app.db", "app.db", id="service-db-path"),
        pytest.param("REACTOR_REDIS_URL", "redis://h:6379/1", "redis://h:6379/1", id="redis"),
        pytest.param("REACTOR_REDIS_PREFIX", "desk-eu", "desk-eu", id="redis-prefix"),
        pytest.param("REACTOR_RECLAIM_AFTER", "2.5", 2.5, id="reclaim-seconds"),
        pytest.param("REACTOR_RECLAIM_AFTER", "2m", 120.0, id="reclaim-duration"),
        pytest.param("REACTOR_RETENTION", "30d", timedelta(days=30), id="retention"),
        pytest.param("REACTOR_API_TOKENS_FILE", "tokens.txt", Path("tokens.txt"), id="file"),
        pytest.param("REACTOR_ALLOWED_HOSTS", " a.example, b.example,", ("a.example", "b.example")),
        pytest.param("REACTOR_MAX_BODY", " 2048 ", 2048, id="max-body"),
        pytest.param("REACTOR_STREAM_BUFFER", "50", 50, id="buffer"),
        pytest.param("REACTOR_MAX_STREAMS", "8", 8, id="streams"),
        pytest.param("REACTOR_OTEL", "on", True, id="otel-on"),
        pytest.param("REACTOR_OTEL", "0", False, id="otel-off"),
        pytest.param("REACTOR_OTEL_CAPTURE_CONTENT", "yes", True, id="content"),
        pytest.param("REACTOR_MAX_TEMPLATE_CHARS", "100", 100, id="template"),
        pytest.param("REACTOR_HANDLER_THREADS", "4", 4, id="threads"),
        pytest.param("REACTOR_SPEND_CAP_USD", "12.5", 12.5, id="spend-cap"),
        pytest.param("REACTOR_SPEND_CAP_PER", "1d", timedelta(days=1), id="spend-period"),
        pytest.param("REACTOR_AUDIT_CHAIN", "off", False, id="chain-off"),
    ],
)
def test_each_variable_is_read_typed(variable: str, text: str, value: object) -> None:
    config = Settings.from_environ({variable: text})
    assert getattr(config, field(variable)) == value
    assert config.effective()[list(DEFAULTS).index(variable)][2] == "env"


def test_an_empty_variable_counts_as_unset() -> None:
    config = Settings.from_environ({"REACTOR_MAX_STREAMS": "", "REACTOR_OTEL": ""})
    assert (config.max_streams, config.otel) == (256, False)
    assert {source for _, _, source in config.effective()} == {"default"}


def test_every_bad_value_is_one_line_naming_its_variable() -> None:
    environ = {
        "REACTOR_MAX_STREAMS": "abc",
        "REACTOR_OTEL": "maybe",
        "REACTOR_HANDLER_THREADS": "0",
        "REACTOR_RETENTION": "a month",
        "REACTOR_RECLAIM_AFTER": "-1",
        "REACTOR_REDIS_URL": "http://cache",
        "REACTOR_DB": "mysql://db/runs",
        "REACTOR_MAX_BODY": "1e6",
    }
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ(environ)
    assert isinstance(raised.value, ValueError)
    forms = "a file path, sqlite:///path.db or postgresql://user@host:5432/dbname"
    assert str(raised.value).splitlines() == [
        f"REACTOR_DB='mysql://db/runs': is not a database this can use; use {forms}",
        "REACTOR_REDIS_URL='http://cache': must be a Redis URL like redis://127.0.0.1:6379/0",
        "REACTOR_RECLAIM_AFTER='-1': must be a number of seconds above 0 (30, 2.5) or a "
        "duration (45s, 2m)",
        "REACTOR_RETENTION='a month': is not a duration: write a whole number and a unit, "
        "30d (days), 12h (hours), 90m (minutes), 45s (seconds) or 2w (weeks)",
        "REACTOR_MAX_BODY='1e6': must be a whole number >= 1",
        "REACTOR_MAX_STREAMS='abc': must be a whole number >= 1",
        "REACTOR_OTEL='maybe': is neither on nor off: set it to 1 for on, or 0 (or unset it) "
        "for off",
        "REACTOR_HANDLER_THREADS='0': must be a whole number >= 1",
    ]


def test_a_bad_token_list_is_named_without_showing_the_tokens() -> None:
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ({"REACTOR_API_TOKENS": "s3cret:alice,0ther-s3cret"})
    assert str(raised.value) == (
        "REACTOR_API_TOKENS='***': entry 2 is not token:user_id or token:user_id:role+role; "
        "write entries such as s3cret:alice or s3cret:alice:approver+operator (no ':' in "
        "tokens or user ids)"
    )


def test_a_token_naming_an_unknown_role_is_one_line_naming_the_roles() -> None:
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ({"REACTOR_API_TOKENS": "s3cret:alice:admin,0ther:bob:aprover"})
    assert str(raised.value) == (
        "REACTOR_API_TOKENS='***': entry 2 names the unknown role(s) 'aprover'; the roles "
        "are viewer, operator, approver, admin"
    )


def test_a_bad_way_to_authenticate_is_one_line() -> None:
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ({"REACTOR_AUTH": "ldap"})
    assert str(raised.value) == (
        "REACTOR_AUTH='ldap': is not a way to authenticate: set it to tokens "
        "(REACTOR_API_TOKENS, the default) or jwt (bearer JWTs, with REACTOR_JWT_JWKS_URL or "
        "REACTOR_JWT_PUBLIC_KEY)"
    )
    assert "0ther" not in str(raised.value)


def test_secrets_are_masked_where_the_settings_are_shown() -> None:
    config = Settings.from_environ(
        {
            "REACTOR_API_TOKENS": "s3cret:alice,0ther:bob",
            "REACTOR_SERVICE_DB": "postgresql://app:pa55word@db.internal:5432/app",
            "REACTOR_REDIS_URL": "redis://:r3dis@cache:6379/0",
        }
    )
    shown = {name: value for name, value, _ in config.effective()}
    assert shown["REACTOR_API_TOKENS"] == "*** (2 tokens)"
    assert shown["REACTOR_SERVICE_DB"] == "postgresql://app:***@db.internal:5432/app"
    assert shown["REACTOR_REDIS_URL"] == "redis://:***@cache:6379/0"
    assert not re.search("s3cret|0ther|pa55word|r3dis", repr(config) + str(shown))


def test_the_audit_key_is_a_secret_of_at_least_16_bytes() -> None:
    config = Settings.from_environ({"REACTOR_AUDIT_KEY": "k3y-0f-the-chain-s3cret"})
    assert config.audit_key is not None
    assert config.audit_key.get_secret_value() == "k3y-0f-the-chain-s3cret"
    shown = {name: value for name, value, _ in config.effective()}
    assert shown["REACTOR_AUDIT_KEY"] == "*** (set)"
    assert "k3y" not in repr(config) + str(shown)
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ({"REACTOR_AUDIT_KEY": "sh0rt"})
    assert str(raised.value) == (
        "REACTOR_AUDIT_KEY='***': must be a secret of at least 16 bytes (e.g. `openssl rand "
        "-hex 32`)"
    )


def test_options_win_over_the_environment_and_say_so() -> None:
    config = Settings.from_environ(
        {"REACTOR_SERVICE_DB": "sqlite:///env.db", "REACTOR_MAX_STREAMS": "9"},
        service_db="sqlite:///option.db",
    )
    assert config.service_db == "sqlite:///option.db"
    sources = {name: source for name, _, source in config.effective()}
    assert sources["REACTOR_SERVICE_DB"] == "option"
    assert sources["REACTOR_MAX_STREAMS"] == "env"
    assert sources["REACTOR_OTEL"] == "default"


def test_the_process_settings_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_MAX_STREAMS", "7")
    first = settings()
    monkeypatch.setenv("REACTOR_MAX_STREAMS", "8")
    assert settings() is first
    assert settings().max_streams == 7
    settings.cache_clear()
    assert settings().max_streams == 8
    assert Settings().max_streams == 8


def test_a_script_running_a_graph_gets_the_bad_values_as_a_value_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REACTOR_MAX_TEMPLATE_CHARS", "lots")
    monkeypatch.setenv("REACTOR_HANDLER_THREADS", "-2")
    graph = reactive([agent(name="echo", run=lambda ctx: ctx.input, updates="out")])
    with pytest.raises(ValueError, match=r"^REACTOR_MAX_TEMPLATE_CHARS='lots'") as raised:
        graph.run_sync(input=1)
    assert str(raised.value).splitlines() == [
        "REACTOR_MAX_TEMPLATE_CHARS='lots': must be a whole number >= 1",
        "REACTOR_HANDLER_THREADS='-2': must be a whole number >= 1",
    ]


def test_templates_read_their_limit_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_MAX_TEMPLATE_CHARS", "20")
    from reactor._agents.templates import compile_template, render

    template = compile_template("{{ input }}", agent="a", field="prompt")
    assert render(template, {"input": "x" * 20}, agent="a", field="prompt") == "x" * 20
    with pytest.raises(TemplateError, match="rendered more than 20 characters"):
        render(template, {"input": "x" * 21}, agent="a", field="prompt")


@pytest.mark.parametrize(
    ("text", "location"),
    [
        pytest.param("runs.db", Path("runs.db"), id="path"),
        pytest.param("sqlite:///runs.db", Path("runs.db"), id="sqlite-relative"),
        pytest.param("sqlite:////var/runs.db", Path("/var/runs.db"), id="sqlite-absolute"),
        pytest.param("sqlite+aiosqlite:///runs.db", Path("runs.db"), id="sqlite-driver"),
        pytest.param("postgresql://u@h/db", "postgresql://u@h/db", id="postgresql"),
        pytest.param("postgres://u@h/db", "postgres://u@h/db", id="postgres"),
        pytest.param("postgresql+psycopg://u@h/db", "postgresql://u@h/db", id="pg-driver"),
    ],
)
def test_a_database_is_named_by_path_or_url_alike(text: str, location: Path | str) -> None:
    assert database_location(text) == location


@pytest.mark.parametrize("text", ["mysql://h/db", "sqlite://", "sqlite:///:memory:", ""])
def test_a_database_that_is_no_file_nor_server_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"; use a file path, sqlite:///path.db or postgresql"):
        database_location(text)


def test_a_service_may_keep_its_database_in_memory() -> None:
    assert database_location("sqlite://", memory=True) == "sqlite://"


def test_a_url_without_a_password_is_shown_as_it_is() -> None:
    assert masked_url("postgresql://app@h/db") == "postgresql://app@h/db"
    assert masked_url("runs.db") == "runs.db"


def test_reactor_service_settings_is_this_class_and_needs_no_service_stack() -> None:
    import reactor.service

    assert reactor.service.Settings is Settings
    code = (
        "import sys; from reactor._signals.settings import settings; settings(); "
        "heavy = {'fastapi', 'uvicorn', 'sqlalchemy', 'redis'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param(
            "postgresql://app:s3cret@db/app?sslpassword=k3y&sslmode=require",
            "postgresql://app:***@db/app?sslpassword=***&sslmode=require",
            id="postgres-sslpassword",
        ),
        pytest.param(
            "postgresql://db/app?user=app&password=s3cret",
            "postgresql://db/app?user=app&password=***",
            id="postgres-password-parameter",
        ),
        pytest.param(
            "rediss://cache:6380/2?password=s3cret&ssl_cert_reqs=none",
            "rediss://cache:6380/2?password=***&ssl_cert_reqs=none",
            id="redis-password-parameter",
        ),
        pytest.param(
            "https://collector/v1?token=s3cret&Api_Key=k3y#x",
            "https://collector/v1?token=***&Api_Key=***#x",
            id="tokens-any-case",
        ),
    ],
)
def test_secrets_in_the_query_string_are_masked_like_a_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_query_string_secrets_are_masked_in_the_settings_and_their_errors() -> None:
    config = Settings.from_environ(
        {"REACTOR_SERVICE_DB": "postgresql://db/app?password=s3cret&sslpassword=k3y"}
    )
    shown = {name: value for name, value, _ in config.effective()}
    assert shown["REACTOR_SERVICE_DB"] == "postgresql://db/app?password=***&sslpassword=***"
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ({"REACTOR_REDIS_URL": "redis://:s3cret@[::1"})
    assert str(raised.value) == (
        "REACTOR_REDIS_URL='redis://:***@[::1': is not a URL Redis can use (Invalid IPv6 URL); "
        "write it like redis://:password@host:6379/0"
    )


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        pytest.param(
            "REACTOR_RETENTION",
            "99999999999w",
            "REACTOR_RETENTION='99999999999w': is not a duration",
            id="retention-overflow",
        ),
        pytest.param(
            "REACTOR_REDIS_URL",
            "redis://cache:port/0",
            "REACTOR_REDIS_URL='redis://cache:port/0': is not a URL Redis can use",
            id="redis-port",
        ),
        pytest.param(
            "REACTOR_REDIS_URL",
            "redis://cache:6379/0?password=s3cret&db=x",
            "REACTOR_REDIS_URL='redis://cache:6379/0?password=***&db=x': is not a URL Redis "
            "can use",
            id="redis-option",
        ),
        pytest.param(
            "REACTOR_REDIS_URL",
            "redis://cache:6379/queue",
            "REACTOR_REDIS_URL='redis://cache:6379/queue': names the database 'queue'; Redis "
            "databases are numbers (/0)",
            id="redis-database",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2_from_the_command(
    variable: str, value: str, line: str, tmp_path: Path
) -> None:
    environ = {**os.environ, variable: value}
    done = subprocess.run(
        [sys.executable, "-m", "reactor", "serve", "--db", str(tmp_path / "app.db"), "--port", "0"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    output = (done.stdout + done.stderr).strip().splitlines()
    assert len(output) == 1, output
    assert line in json.loads(output[0])["error"]
    assert "s3cret" not in output[0]
    assert "Traceback" not in output[0]


def test_an_unknown_variable_is_named_with_the_setting_it_may_mean() -> None:
    environ = {
        "REACTOR_RETENTON": "7d",
        "REACTOR_MAXBODY": "10",
        "REACTOR_NOTHING_LIKE_IT": "1",
        "REACTOR_RETENTION": "7d",
        "REACTOR_TEST_POSTGRES": "postgresql://x",  # the suite's own
        "OTHER": "x",
    }
    assert unknown_variables(environ) == [
        ("REACTOR_MAXBODY", "REACTOR_MAX_BODY"),
        ("REACTOR_NOTHING_LIKE_IT", None),
        ("REACTOR_RETENTON", "REACTOR_RETENTION"),
    ]


def test_the_command_warns_about_an_unknown_variable(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reactor", "serve", "--print-config"],
        env={**os.environ, "REACTOR_RETENTON": "7d"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "REACTOR_RETENTON is not a reactor setting; did you mean REACTOR_RETENTION?" in (
        done.stdout + done.stderr
    )


def test_one_variable_names_the_database_of_every_command() -> None:
    alone = Settings.from_environ({"REACTOR_DB": "postgresql://app@db/app"})
    assert alone.db == alone.service_db == "postgresql://app@db/app"
    older = Settings.from_environ({"REACTOR_SERVICE_DB": "sqlite:///shared.db"})
    assert older.db == older.service_db == "sqlite:///shared.db"
    both = Settings.from_environ(
        {"REACTOR_DB": "shared.db", "REACTOR_SERVICE_DB": "sqlite:///shared.db"}
    )
    assert both.db == "shared.db"
    option = Settings.from_environ({}, service_db="sqlite:///given.db")
    assert option.db == "sqlite:///given.db"
    assert {name: source for name, _, source in option.effective()}["REACTOR_DB"] == "option"
    with pytest.raises(ServiceConfigError) as raised:
        Settings.from_environ(
            {"REACTOR_DB": "postgresql://app:s3cret@db/app", "REACTOR_SERVICE_DB": "other.db"}
        )
    assert str(raised.value) == (
        "REACTOR_DB='postgresql://app:***@db/app' and REACTOR_SERVICE_DB (its older "
        "name)='other.db' name different databases; set REACTOR_DB alone"
    )
    neither = Settings.from_environ({})
    assert (neither.db, neither.service_db) == (".reactor/runs.db", "sqlite:///.reactor/app.db")
