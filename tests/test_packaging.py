"""What ``pip install reactor-agents`` gives: the engine alone, and each extra its part.

``EXTRAS`` (``reactor/exceptions/_extras.py``) names the modules each extra installs;
it is checked here against pyproject.toml's ``optional-dependencies`` and against the
modules reactor imports. Then the core is built into a wheel and installed alone in a
fresh virtualenv (by uv, which resolves as pip does, in seconds), where the README's
quickstart runs and none of the service stack is installed, imported, or needed, and a
part of an extra says in one line what to install. Each extra is then installed alone
in a virtualenv of its own, where its part runs as a user runs it (``reactor serve
--print-config`` for ``[service]``): an extra that misses a package its part needs
(``make test`` installs them all, and never sees it) fails here.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from reactor.exceptions._extras import DISTRIBUTION, EXTRAS
from tests.reactor.databases import create_database, drop_database

REDIS_URL = os.environ.get("REACTOR_TEST_REDIS", "redis://127.0.0.1:6379")

ROOT = Path(__file__).parent.parent
PACKAGES = ("reactor", "stores", "migration")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OPTIONAL = {
    extra: packages
    for extra, packages in PYPROJECT["optional-dependencies"].items()
    if extra not in ("all", "dev")
}

SERVICE_STACK = (
    "fastapi",
    "starlette",
    "sqlalchemy",
    "uvicorn",
    "alembic",
    "aiosqlite",
    "taskiq",
    "redis",
    "psycopg",
    "apscheduler",
    "grandalf",
    "rich",
    "mcp",
    "opentelemetry.sdk",
)
"""Modules the core must not install; a few the extras only bring in (starlette)."""

SUBPROCESS_TIMEOUT = 300
"""Seconds for each pip or Python subprocess: a stuck install fails, never hangs."""


def name_of(requirement: str) -> str:
    """A requirement's distribution name, normalized (``"sqlalchemy[asyncio]>=2"``)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def modules_of(distribution: str) -> set[str]:
    """The dotted names of the modules and packages (namespace ones too) it installs."""
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{distribution} is not installed: run `pip install -e '.[dev,all]'`")
    modules: set[str] = set()
    for file in files:
        parts = file.parts
        if parts[-1].endswith(".py") and not parts[0].endswith((".dist-info", ".data")):
            dotted = (*parts[:-1], parts[-1].removesuffix(".py").removesuffix("__init__"))
            dotted = tuple(filter(None, dotted))
            modules.update(".".join(dotted[:n]) for n in range(1, len(dotted) + 1))
    return modules


def test_extras_are_the_optional_dependencies_all_installs() -> None:
    assert set(EXTRAS) == set(OPTIONAL)
    (everything,) = PYPROJECT["optional-dependencies"]["all"]
    match = re.fullmatch(rf"{DISTRIBUTION}\[(?P<extras>[a-z,]+)\]", everything)
    assert match is not None, everything
    assert sorted(match["extras"].split(",")) == sorted(EXTRAS)
    core = {name_of(requirement) for requirement in PYPROJECT["dependencies"]}
    for extra, packages in OPTIONAL.items():
        assert not core & {name_of(package) for package in packages}, extra


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_installs_its_modules_and_each_package_gives_one(extra: str) -> None:
    provided = {name_of(package): modules_of(name_of(package)) for package in OPTIONAL[extra]}
    for module in EXTRAS[extra]:
        assert any(module in modules for modules in provided.values()), (
            f"{module} (EXTRAS[{extra!r}]) comes from none of {sorted(provided)}"
        )
    for package, modules in provided.items():
        assert modules & set(EXTRAS[extra]), (
            f"{package} ([{extra}]) gives none of EXTRAS[{extra!r}]: name the module "
            "reactor imports from it, or drop the package"
        )


def imported_modules() -> dict[str, Path]:
    """Each third-party top-level module reactor imports, with one file importing it."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if top not in sys.stdlib_module_names and top not in PACKAGES:
                        found.setdefault(top, path.relative_to(ROOT))
    return found


def test_every_module_reactor_imports_is_a_dependency_or_an_extras() -> None:
    declared = {name_of(r) for r in PYPROJECT["dependencies"]}
    declared |= {name_of(r) for packages in OPTIONAL.values() for r in packages}
    # A package a declared one requires (pydantic's pydantic-core, anthropic's HTTP
    # library, FastAPI's Starlette) comes with it.
    installed_with = {
        name_of(requirement)
        for package in declared
        for requirement in importlib.metadata.requires(package) or []
        if "extra ==" not in requirement
    }
    distributions = importlib.metadata.packages_distributions()
    for module, path in imported_modules().items():
        if path == Path("reactor/testing/plugin.py"):
            continue  # the pytest plugin: loaded by pytest, never by reactor
        sources = {name_of(d) for d in distributions.get(module, [])}
        assert sources & (declared | installed_with), (
            f"{path} imports {module} (from {sorted(sources) or 'nothing installed'}), "
            "which neither the dependencies nor an extra of pyproject.toml install"
        )


def quickstart() -> str:
    """The README's quickstart.py, as a user saves it."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^<!-- file: quickstart.py -->\n```python\n(.*?)^```", readme, re.S | re.M)
    assert block is not None, "the README has no quickstart.py block"
    return block.group(1)


PROBE = """
import importlib.metadata, importlib.util, json, runpy, sys

runpy.run_path("quickstart.py", run_name="__main__")
imported = sorted({name.partition(".")[0] for name in sys.modules})

import reactor
from reactor.exceptions import MissingExtraError
from reactor.exceptions._extras import EXTRAS, has_extras

importable = []
for module in [m for modules in EXTRAS.values() for m in modules] + sys.argv[2:]:
    try:
        if importlib.util.find_spec(module) is not None:
            importable.append(module)
    except ImportError:
        pass
try:
    import reactor.service
except MissingExtraError as exc:
    service = [type(exc).__name__, str(exc)]
else:
    service = ["imported", reactor.service.__file__]
requires = {
    dist.metadata["Name"]: [r for r in dist.requires or [] if "extra ==" not in r]
    for dist in importlib.metadata.distributions()
}
with open(sys.argv[1], "w") as report:
    json.dump(
        {
            "imported": imported,
            "reactor": reactor.__file__,
            "importable": importable,
            "extras": {extra: has_extras(extra) for extra in EXTRAS},
            "service": service,
            "requires": requires,
        },
        report,
    )
"""


def run(command: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    """Run ``command`` to its end within the timeout; its output, or a failure showing it."""
    try:
        done = subprocess.run(
            [str(part) for part in command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{command} took over {SUBPROCESS_TIMEOUT} s: {exc.stdout!r} {exc.stderr!r}")
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def a_clean_environment() -> dict[str, str]:
    """This process's environment without its virtualenv, Python path or reactor settings.

    The installer's own settings (``PIP_*``, ``UV_*``, their files and caches) stay: the
    install uses them as any install here does.
    """
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
        and not key.startswith(("PYTEST", "REACTOR_", "COV_"))
    }


UV: list[str | Path] = [sys.executable, "-m", "uv"]  # pip's resolver, in seconds
ENV = a_clean_environment()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution built into a wheel once, from a copy of the checkout's packages."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"  # what the wheel is built from, out of the shared checkout
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    run([*UV, "build", "--quiet", "--wheel", "--out-dir", tmp_path / "dist", source], source, ENV)
    (built,) = (tmp_path / "dist").glob("reactor_agents-*.whl")
    return built


def installed_alone(tmp_path: Path, wheel: Path, extra: str | None) -> Path:
    """A fresh virtualenv with the wheel (and ``extra``, if given) installed; its folder."""
    venv = tmp_path / "venv"
    run([*UV, "venv", "--quiet", "--python", sys.executable, venv], tmp_path, ENV)
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    python = venv / "bin" / "python"
    run([*UV, "pip", "install", "--quiet", "--python", python, requirement], tmp_path, ENV)
    return venv


def user_folder(tmp_path: Path) -> Path:
    """The user's project: nothing of the checkout on ``sys.path``."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "quickstart.py").write_text(quickstart())
    return user


@pytest.mark.timeout(4 * SUBPROCESS_TIMEOUT)  # an install: seconds, on a slow day minutes
def test_the_core_alone_runs_the_quickstart_without_the_service_stack(
    tmp_path: Path, wheel: Path
) -> None:
    env = ENV
    venv = installed_alone(tmp_path, wheel, None)
    python = venv / "bin" / "python"
    listed = run([*UV, "pip", "list", "--python", python, "--format=json"], tmp_path, env)
    installed = {name_of(entry["name"]): entry["version"] for entry in json.loads(listed)}

    user = user_folder(tmp_path)
    (user / "probe.py").write_text(PROBE)
    output = run([python, "-W", "error", "probe.py", "report.json", *SERVICE_STACK], user, env)
    report = json.loads((user / "report.json").read_text())
    assert output.splitlines() == ["completed buy"]
    assert Path(report["reactor"]).is_relative_to(venv), report["reactor"]

    # No extra's package is installed, but what a core dependency itself requires
    # (anthropic requires opentelemetry-api).
    requires = {name_of(d): {name_of(r) for r in rs} for d, rs in report["requires"].items()}
    for extra, packages in OPTIONAL.items():
        for package in map(name_of, packages):
            if package in installed:
                needed_by = {d for d, rs in requires.items() if package in rs} - {DISTRIBUTION}
                assert needed_by, f"{package} ([{extra}]) is installed with the core alone"
    assert report["extras"] == dict.fromkeys(EXTRAS, False)
    assert not set(report["importable"]) & set(SERVICE_STACK), report["importable"]
    stack = {module.partition(".")[0] for module in SERVICE_STACK}
    stack |= {m.partition(".")[0] for modules in EXTRAS.values() for m in modules}
    assert not stack & set(report["imported"]), "the quickstart imported a part of an extra"

    kind, message = report["service"]
    assert kind == "MissingExtraError"
    assert re.fullmatch(
        r"reactor\.service needs the service extra \(\w+ is not installed\): "
        rf"pip install '{DISTRIBUTION}\[service\]'",
        message,
    ), message

    for command, extras in (("serve", "service"), ("worker", "service,scaleout")):
        done = subprocess.run(
            [venv / "bin" / "reactor", command],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        assert done.returncode != 0
        assert done.stdout == ""
        assert re.fullmatch(
            rf"reactor {command}: error: this command needs the .* "
            rf"pip install '{DISTRIBUTION}\[{extras}\]'\n",
            done.stderr,
        ), done.stderr


RECORD = """
import sys

from quickstart import bot
from reactor import ScriptedProvider

if sys.argv[1].startswith("postgresql://"):
    from reactor import PostgresSignalStore as Store
else:
    from reactor import SQLiteSignalStore as Store

answers = ScriptedProvider({"analyst": ["up"], "risk": ["low"]})
with Store(sys.argv[1]) as store:
    bot.run_sync(input={"symbol": "AAPL"}, provider=answers, record=store)
"""
"""Records the quickstart's run to the store ``argv[1]`` names (a path or a URL)."""

OTEL = """
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from quickstart import bot
from reactor import ScriptedProvider
from reactor.otel import OpenTelemetryReporter

spans = InMemorySpanExporter()
tracing = TracerProvider()
tracing.add_span_processor(SimpleSpanProcessor(spans))
answers = ScriptedProvider({"analyst": ["up"], "risk": ["low"]})
bot.run_sync(input={"symbol": "AAPL"}, provider=answers, reporters=[OpenTelemetryReporter(tracing)])
print(sorted({span.name.split()[0] for span in spans.get_finished_spans()}))
"""
"""Traces the quickstart's run with reactor.otel; prints the kinds of its spans."""

MCP = """
import asyncio

from mcp.server.mcpserver import MCPServer as App

from reactor import MCPServer, agent
from reactor.testing import FakeAnthropic, ToolUse, turn

app = App("calc")


@app.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


async def main() -> None:
    fake = FakeAnthropic(turn(ToolUse("t1", "mcp__calc__add", {"a": 2, "b": 3})), "It is 5.")
    server = MCPServer("calc", transport="inprocess", server=app)
    adder = agent(name="adder", mcps=[server], provider=fake.provider())
    print(await adder.prompt("2 + 3?"), fake.bodies[1]["messages"][-1]["content"][0]["content"])
    await fake.aclose()


asyncio.run(main())
"""
"""Calls an in-process MCP server's tool from an agent; prints the answer and the result."""

REDIS = """
import asyncio
import sys
import uuid

import redis

from reactor._providers.limits import Limits


async def main() -> None:
    key = f"packaging-{uuid.uuid4().hex}"
    limits = Limits(requests_per_minute=6000, redis_url=sys.argv[1], key=key)
    async with limits.slot():
        pass
    client = redis.Redis.from_url(sys.argv[1])
    print(sorted(client.hgetall(f"reactor:ratelimit:{key}")))
    client.delete(f"reactor:ratelimit:{key}")


asyncio.run(main())
"""
"""Takes a token from a rate limit shared over the Redis at ``argv[1]``; prints the bucket."""


def part_of(extra: str, python: Path, user: Path) -> str:
    """Run what ``extra`` is for, as a user would, in the virtualenv; what it printed."""
    reactor = python.parent / "reactor"
    if extra == "service":
        return run([reactor, "serve", "--print-config"], user, ENV)
    if extra in ("cli", "postgres"):  # a run recorded, then listed by `reactor runs`
        (user / "record.py").write_text(RECORD)
        where = create_database() if extra == "postgres" else "runs.db"
        try:
            run([python, "-W", "error", "record.py", where], user, ENV)
            return run([reactor, "runs", "--db", where], user, ENV)
        finally:
            if extra == "postgres":
                drop_database(where)
    scripts = {"otel": OTEL, "mcp": MCP, "scaleout": REDIS}
    (user / "part.py").write_text(scripts[extra])
    return run([python, "-W", "error", "part.py", REDIS_URL], user, ENV)


EXPECTED = {
    "service": r"(?s).*\bREACTOR_API_TOKENS\b.*",
    "cli": r"(?s).*\bcompleted\b.*",
    "postgres": r"(?s).*\bcompleted\b.*",
    "otel": r"\['chat', 'invoke_agent', 'invoke_workflow'\]\n",
    "mcp": r"It is 5\. 5\n",
    "scaleout": r"\[b'at', b'tokens'\]\n",
}
"""What each extra's part prints when it works."""


@pytest.mark.timeout(4 * SUBPROCESS_TIMEOUT)
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_alone_runs_its_part(tmp_path: Path, wheel: Path, extra: str) -> None:
    venv = installed_alone(tmp_path, wheel, extra)
    user = user_folder(tmp_path)
    python = venv / "bin" / "python"
    probe = f"from reactor.exceptions._extras import has_extras; print(has_extras({extra!r}))"
    installed = run([python, "-c", probe], user, ENV)
    assert installed == "True\n", f"[{extra}] alone does not install every module it needs"
    printed = part_of(extra, python, user)
    assert re.fullmatch(EXPECTED[extra], printed), printed


def test_the_readme_says_what_each_extra_is_for() -> None:
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| [^|]+ \|$", readme, re.MULTILINE)
    assert sorted(rows) == sorted([*EXTRAS, "all"])
