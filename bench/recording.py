"""Recording workload: a million signals to SQLite, rate and peak memory.

Run in a subprocess so that the peak RSS measured is this workload's alone.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._runner import Row
from reactor import RunInfo, SignalBus, SQLiteSignalStore

SIGNALS = 1_000_000
HISTORY = 1_000


def record(count: int, path: Path) -> dict[str, float]:
    """Emit ``count`` signals on a bus whose every signal is recorded to ``path``."""
    store = SQLiteSignalStore(path)
    bus = SignalBus(history_limit=HISTORY, run_id="run_bench")
    store.start_run(RunInfo(run_id="run_bench", graph="bench", started_at=time.time()))
    bus.subscribe("**", store.append)
    payload = {"agent": "writer", "content": "a token of text"}
    emit = bus.emit
    start = time.perf_counter()
    for _ in range(count):
        emit("text:delta", payload, source="writer")
    store.flush()
    elapsed = time.perf_counter() - start
    store.close()
    return {"seconds": elapsed, "peak_mb": peak_rss_kb() / 1024, "count": count}


def peak_rss_kb() -> int:
    """This process's peak resident memory.

    ``VmHWM`` belongs to this process image; ``ru_maxrss`` can carry the high-water
    mark of the parent it was forked from, so it is only the fallback.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def run(runs: int, scale: float) -> list[Row]:
    count = max(10_000, int(SIGNALS * scale))
    with tempfile.TemporaryDirectory() as folder:
        output = subprocess.run(
            [sys.executable, "-m", "bench.recording", str(count), str(Path(folder) / "runs.db")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    figures = json.loads(output)
    rate = figures["count"] / figures["seconds"]
    peak = figures["peak_mb"]
    return [
        Row(
            workload=f"record {count:,} signals to SQLite (history_limit={HISTORY:,})",
            ours=f"{rate:,.0f} signals/s, peak RSS {peak:,.0f} MB",
            baseline="—",
            ratio=rate,
            ratio_text="—",
            target=">= 100,000/s, <= 200 MB",
            met=rate >= 100_000 and peak <= 200,
        )
    ]


if __name__ == "__main__":
    print(json.dumps(record(int(sys.argv[1]), Path(sys.argv[2]))))
