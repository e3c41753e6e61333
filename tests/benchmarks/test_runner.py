"""The benchmark runner: turns, warm-up, statistics, CPU and child peak RSS, table and JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.runner import Bench, Command, Line, Row, Run, measure, ratio, table
from tests.benchmarks.figures import figure_values


def allocate(mib: str, hold_s: str = "0.3") -> dict[str, object]:
    """(In a child) touch ``mib`` MiB, hold it long enough for the tree sampler, report it."""
    block = np.ones(int(mib) << 20, np.uint8)
    time.sleep(float(hold_s))
    return {"allocated_mib": float(block.size >> 20), "note": "kept as it is"}


def busy(seconds: str) -> None:
    """(In a child) spin the CPU for ``seconds``."""
    end = time.process_time() + float(seconds)
    while time.process_time() < end:
        pass


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_rows_take_turns_round_by_round_after_the_warm_up() -> None:
    calls: list[tuple[str, int]] = []

    def row(name: str) -> Row:
        return Row(name, lambda run: calls.append((name, run.index)) or 1)

    res = measure([row("A"), row("B"), row("C")], runs=2, warmup=1)
    assert calls == [(n, i) for i in range(3) for n in "ABC"]  # A B C A B C A B C
    assert [len(res[n].warmup) for n in "ABC"] == [1, 1, 1]
    assert [s.index for s in res["B"].runs] == [1, 2]


def test_rows_can_run_one_after_another_instead() -> None:
    calls: list[tuple[str, int]] = []
    rows = [Row(n, lambda run, n=n: calls.append((n, run.index)) or 1) for n in "AB"]
    measure(rows, runs=2, warmup=1, interleave=False)
    assert calls == [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("B", 1), ("B", 2)]


def test_min_median_max_of_a_recorded_figure_and_the_ratio_line() -> None:
    def body(run: Run) -> int:
        run.record("value", [5.0, 1.0, 3.0, 2.0][run.index])
        return 4

    res = measure([Row("x", body), Row("y", lambda run: run.record("value", 2.0) or 4)], runs=3)
    x = res["x"]
    assert x.values("value") == [1.0, 3.0, 2.0]  # the warm-up's 5.0 is left out
    assert (x.min("value"), x.median("value"), x.max("value")) == (1.0, 2.0, 3.0)
    text, value = ratio("x / y", "x", "y", figure="value").render(res)
    assert value == 1.0 and text == "x / y 1.00x"


def test_untimed_parts_are_left_out_and_a_busy_row_has_cpu_seconds() -> None:
    def body(run: Run) -> int:
        with run.untimed():
            time.sleep(0.2)
        _spin(0.05)
        return 10

    t0 = time.perf_counter()
    sample = measure([Row("busy", body)], runs=1, warmup=0)["busy"].runs[0].figures
    total = time.perf_counter() - t0  # the whole call: the 0.2 s asleep and all the rest
    # the sleep is left out whatever the machine's load: no margin on the spin's wall time
    assert 0.04 <= sample["wall_s"] <= total - 0.2 and sample["cpu_s"] >= 0.04
    assert sample["rate"] == pytest.approx(10 / sample["wall_s"])
    assert sample["cpu_ms"] == pytest.approx(1e3 * sample["cpu_s"] / 10)


def test_a_child_that_allocates_200_mib_peaks_above_it() -> None:
    cmd = Command("alloc", "tests.benchmarks.test_runner:allocate", ("200",), memory=True)
    (sample,) = measure([cmd], runs=1, warmup=0)["alloc"].runs
    assert sample.figures["allocated_mib"] == 200 and sample.extra == {"note": "kept as it is"}
    assert sample.figures["peak_rss_mib"] >= 200  # its own VmHWM
    assert sample.figures["tree_peak_rss_mib"] >= 200  # sampled over its process tree
    assert sample.figures["wall_s"] >= sample.figures["call_s"] >= 0.3


def test_a_busy_child_reports_its_cpu_seconds_from_its_rusage() -> None:
    cmd = Command("busy", "tests.benchmarks.test_runner:busy", ("0.3",))
    (sample,) = measure([cmd], runs=1, warmup=0)["busy"].runs
    assert sample.figures["cpu_s"] >= 0.3


def test_a_failing_child_is_an_error_naming_the_row() -> None:
    with pytest.raises(RuntimeError, match="bad: the child process failed"):
        measure([Command("bad", "tests.benchmarks.test_runner:no_such_function")], runs=1)


def test_the_table_prints_min_median_max_and_the_json_holds_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    with Bench("demo", out) as bench:
        bench.note("setup: nothing")
        bench.measure(
            "section",
            [Row("fast", lambda run: 1000), Row("slow", lambda run: time.sleep(0.01) or 10)],
            runs=3,
            lines=[ratio("fast / slow", "fast", "slow"), Line("constant", lambda r: 2.0)],
        )
    printed = capsys.readouterr().out
    assert "section (3 runs after 1 warm-up, rows interleaved)" in printed
    rates = figure_values(printed, "slow", "samples/s")
    assert len(rates) == 3 and 0 < rates[0] <= rates[1] <= rates[2] < 1001
    assert "fast / slow " in printed and "constant 2.00" in printed
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "demo" and doc["notes"] == ["setup: nothing"]
    (section,) = doc["sections"]
    slow = section["rows"]["slow"]
    assert len(slow["runs"]) == 3 and len(slow["warmup"]) == 1
    assert slow["summary"]["rate"]["median"] == pytest.approx(rates[1], rel=1e-3)
    assert [line["label"] for line in section["lines"]] == ["fast / slow", "constant"]


def test_rows_need_distinct_names_and_a_timed_run() -> None:
    with pytest.raises(ValueError, match="distinct names"):
        measure([Row("a", lambda run: 1), Row("a", lambda run: 1)], runs=1)
    with pytest.raises(ValueError, match="runs must be >= 1"):
        measure([Row("a", lambda run: 1)], runs=0)
    assert table({}) == [table({})[0]]
