"""An older commit's engine, measured beside this checkout's in the same ``make bench``.

DESIGN.md section 39 asks that no earlier workload regress, judged against the commit
before Part V's engine work in the same run. :func:`older_engine` checks that commit
out into a temporary git worktree (removed afterwards) and :func:`probe` runs
``bench/engine_probe.py`` in a fresh interpreter against either engine: this
checkout's, or the worktree's through ``PYTHONPATH``. The script's own folder is kept
off ``sys.path`` (``python -P``), so ``bench/stores.py`` cannot shadow the ``stores``
package, and each side imports its own ``reactor`` and ``stores``. :func:`older_bench`
runs the older commit's own ``python -m bench`` on the same workloads, for the rows
that have no probe (the bus, recording, resume, long-lived runs).

The commit before Part V's engine work is ``e9ccdff`` ("A complexity budget instead of
a line cap", 2026-12-06). The commit before Part III, ``ec7bc4b``, was the reference of
section 34: ``BEFORE_PART_III`` names it still.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "engine_probe.py"
BEFORE_PART_III = "ec7bc4b284fe27843ca8468454b46b94b659242e"
BEFORE_ENGINE_WORK = "e9ccdff8b095a1da8ed59a8de8d4fcdbe99c2434"
LABEL = "e9ccdff (before Part V's engine work)"


@contextlib.contextmanager
def older_engine(commit: str = BEFORE_ENGINE_WORK) -> Iterator[Path | str]:
    """Yield a worktree of ``commit``, or the reason it could not be made (a string).

    The worktree lives in a temporary directory outside the checkout and is removed
    (and pruned from git's list) when the block ends, whatever happens in it.
    """
    with tempfile.TemporaryDirectory(prefix="reactor-bench-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        made = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(tree), commit],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            yield (
                f"no worktree of {commit[:7]} ({made.stderr.strip() or 'git failed'}): "
                "make bench needs a clone with that commit (git fetch --unshallow)"
            )
            return
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                capture_output=True,
            )
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)


def probe(engine: Path, workload: str, n: int, *, tuned: bool = False) -> dict[str, float]:
    """Run one probe workload against the engine at ``engine``; its figures by key."""
    argv = [sys.executable, "-P", str(PROBE), workload, str(n), *(["--tuned"] * tuned)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=_env(engine), cwd=engine, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} (PYTHONPATH={engine}) failed: {done.stderr.strip()[-2000:]}"
        )
    figures = dict(re.findall(r"(\w+)=([0-9.]+)(?=\s|$)", done.stdout))
    if not figures:
        raise RuntimeError(f"{' '.join(argv)} printed no figure: {done.stdout!r}")
    return {key: float(value) for key, value in figures.items() if key != "pid"}


def older_bench(tree: Path, names: list[str], *, quick: bool) -> str:
    """The table the older commit's own ``python -m bench --only NAMES`` prints."""
    argv = [sys.executable, "-m", "bench", "--only", *names, *(["--quick"] * quick)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=_env(tree), cwd=tree, check=False
    )
    table = done.stdout.strip()
    if not table:
        raise RuntimeError(f"{' '.join(argv)} in {tree} failed: {done.stderr.strip()[-2000:]}")
    return table


def _env(engine: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTOR_")}
    env["PYTHONPATH"] = str(engine)
    return env
