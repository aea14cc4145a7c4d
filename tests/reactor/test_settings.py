"""``Settings``: every ``REACTOR_*`` variable, read once, typed, checked, masked when shown."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor import TemplateError, agent, reactive
from reactor._signals.settings import Settings, database_location, masked_url, settings
from reactor.exceptions import ServiceConfigError

REPO = Path(__file__).parents[2]

DEFAULTS: dict[str, Any] = {
    "REACTOR_DB": ".reactor/runs.db",
    "REACTOR_SERVICE_DB": "sqlite:///.reactor/app.db",
    "REACTOR_REDIS_URL": None,
    "REACTOR_RECLAIM_AFTER": 30.0,
    "REACTOR_RETENTION": None,
    "REACTOR_API_TOKENS": None,
    "REACTOR_API_TOKENS_FILE": None,
    "REACTOR_ALLOWED_HOSTS": (),
    "REACTOR_MAX_BODY": 1_048_576,
    "REACTOR_STREAM_BUFFER": 1000,
    "REACTOR_MAX_STREAMS": 256,
    "REACTOR_OTEL": False,
    "REACTOR_OTEL_CAPTURE_CONTENT": False,
    "REACTOR_MAX_TEMPLATE_CHARS": 4_000_000,
    "REACTOR_HANDLER_THREADS": 32,
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
        "REACTOR_API_TOKENS='***': entry 2 is not token:user_id; write pairs such as "
        "s3cret:alice, separated by commas"
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
