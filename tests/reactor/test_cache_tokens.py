"""The prompt cache's input tokens count wherever input tokens are counted.

Anthropic's ``input_tokens`` leaves out the tokens read from and written to the cache;
budgets count them, so the run's metrics, its row in the store, the progress line and
the CLI's figures count them too: one figure for one run, wherever it is read.
"""

from __future__ import annotations

from reactor import MemorySignalStore, ProgressReporter, agent, reactive
from reactor.testing import FakeAnthropic, turn

CACHED = {
    "input_tokens": 10,
    "cache_read_input_tokens": 4_000,
    "cache_creation_input_tokens": 1_000,
}


async def test_a_runs_metrics_and_row_count_the_prompt_caches_input_tokens() -> None:
    fake = FakeAnthropic(turn("done", output_tokens=7, **CACHED))
    graph = reactive({"writer": agent(prompt="Write.")})
    store = MemorySignalStore()
    progress = ProgressReporter()
    try:
        result = await graph.run(provider=fake.provider(), record=store, reporters=[progress])
    finally:
        await fake.aclose()
    assert result.status == "completed", result.error
    assert result.metrics.input_tokens == 5_010
    info = store.info(result.run_id)
    assert (info.input_tokens, info.output_tokens) == (5_010, 7)
    assert progress.tokens == 5_017
