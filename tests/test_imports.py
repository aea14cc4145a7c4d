"""Each package imports on its own, in any order (no import cycles)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("import stores", id="stores"),
        pytest.param("import reactor", id="reactor"),
        pytest.param("import migration", id="migration"),
        pytest.param("import stores, reactor, migration", id="stores-first"),
        pytest.param("import reactor.logging", id="logging"),
    ],
)
def test_package_imports_alone(statement: str) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", statement], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


LEAN_SERVICE = """
import asyncio, sys, tempfile
from reactor.service import ObjectStore, ReactionService

async def main(folder: str) -> None:
    async with ObjectStore(f"sqlite:///{folder}/app.db") as objects:
        async with ReactionService(objects=objects, agents={}):
            pass
        print(sorted({name.split(".")[0] for name in sys.modules} & HEAVY))
        import reactor.service
        reactor.service.create_app(ReactionService(objects=objects, agents={}))
        print(sorted({name.split(".")[0] for name in sys.modules} & HEAVY))

HEAVY = {"fastapi", "redis", "taskiq", "uvicorn"}
with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(folder))
"""


def test_a_service_without_redis_or_http_imports_neither() -> None:
    """A worker's or a script's service pays for neither the web app nor the job queue.

    And the web app, without a job queue (``REACTOR_REDIS_URL``), pays for no Redis client.
    """
    environ = {key: value for key, value in os.environ.items() if key != "REACTOR_REDIS_URL"}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", LEAN_SERVICE],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "['fastapi']"]


def test_the_reactor_command_loads_the_migration_only_for_reactor_migrate() -> None:
    """``reactor migrate`` is declared with every command; its converter loads when it runs."""
    code = (
        "import sys\n"
        "from reactor._cli._parser import build_parser\n"
        "build_parser().parse_args(['migrate', 'flow.yaml'])\n"
        "print(sorted(name for name in sys.modules if name.startswith('migration')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = ast.literal_eval(result.stdout)
    assert loaded == ["migration", "migration._convert", "migration._convert.cli"]
