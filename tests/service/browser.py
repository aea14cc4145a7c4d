"""Debian's Chromium for the web UI's browser tests, installed with apt when it is missing.

Playwright drives the system's ``/usr/bin/chromium`` (never a browser Playwright
downloads). :func:`ensure_chromium` runs before the first test that needs it, from
``pytest_collection_finish`` in ``tests/service/conftest.py``: an install takes longer
than one test's timeout, so it is not part of any test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT = 1200.0
"""Seconds apt is given to download and install Chromium."""


def _apt(*arguments: str) -> list[str]:
    command = ["apt-get", *arguments]
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            pytest.exit(f"{CHROMIUM} is missing and installing it needs root (or sudo).", 1)
        command = ["sudo", "-n", *command]
    return command


def ensure_chromium() -> Path:
    """``/usr/bin/chromium``, installed first (``apt-get install -y chromium``) if it is missing."""
    if CHROMIUM.exists():
        return CHROMIUM
    # Test processes (pytest-xdist) collect at once: one installs, the others wait for it.
    with open(Path(os.getenv("TMPDIR", "/tmp")) / "reactor-chromium.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not CHROMIUM.exists():
            _install()
    return CHROMIUM


def _install() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = _apt("install", "-y", "--no-install-recommends", "chromium")
    print(f"\n{CHROMIUM} is missing; installing it: {' '.join(install)}", flush=True)
    done = subprocess.run(install, env=env, timeout=INSTALL_TIMEOUT, check=False)
    if done.returncode != 0:  # the package lists may be stale or absent: fetch them once
        subprocess.run(_apt("update"), env=env, timeout=INSTALL_TIMEOUT, check=False)
        subprocess.run(install, env=env, timeout=INSTALL_TIMEOUT, check=False)
    if not CHROMIUM.exists():
        pytest.exit(f"Could not install Chromium with {' '.join(install)}.", 1)
