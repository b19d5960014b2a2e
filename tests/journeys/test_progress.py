"""Journey 14: progress and the score table on an 80-column terminal. The ETA comes from the run's average rate
(rich's 30 s window showed -:--:-- for runs whose samples each take longer), and the table fits 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from ctxbench.harness.core.progress import progress


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def bar_line(bar) -> str:
    buf = io.StringIO()
    Console(file=buf, width=80).print(bar.make_tasks_table(bar.tasks))
    return buf.getvalue().rstrip("\n")


def test_eta_from_the_average_rate_when_each_sample_takes_over_30_s():
    clock = FakeClock()
    bar = progress(Console(file=io.StringIO(), width=80), count="{task.fields[samples]}", get_time=clock)
    job = bar.add_task("scoring gemma · ruler/niah_single_1 @ 131072, a long description that must give way",
                       total=10, completed=2, samples="2/10 samples")  # a resumed run: 2 done before this session
    assert bar.columns[-1].render(bar.tasks[0]).plain == "-:--:--"  # nothing done yet in this session
    for done in range(3, 5):
        clock.now += 45  # one sample per 45 s: rich's 30 s window never holds two samples
        bar.update(job, advance=1, samples=f"{done}/10 samples")
    assert bar.columns[-1].render(bar.tasks[0]).plain == "0:04:30"  # 6 left at 45 s each
    line = bar_line(bar)
    assert len(line) <= 80 and line.endswith("4/10 samples 0:01:30 0:04:30"), line


def test_the_score_table_fits_80_columns(user_in_process):
    """In process (the table's width is the point, not the process): COLUMNS=80 reaches rich as in a terminal."""
    r = user_in_process.run("ctxbench score --tasks kv/retrieval,ruler/niah_single_1 --lengths 1k,2k,4k,8k --samples 2 "
                 "--backend echo", env={"COLUMNS": "80"})
    assert r.code == 0, r.err[-2000:]
    table = r.out[: r.out.index("results:")]
    assert max(len(x) for x in table.splitlines()) <= 80, table
    row = next(x for x in table.splitlines() if "kv/retrieval" in x)
    assert row.count("0.0") == 4, table  # one line per task: no cell wrapped onto a second line
    assert "intervals left out" in table.lower()  # the table says where its intervals went
