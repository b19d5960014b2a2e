"""Third-party output during a score session goes to the run log, not the terminal (issue 32, "Quiet, early
refusals"): a library's own terminal handler (transformers' dtype notice, DeepSpeed's accelerator line) and a
warning raised in a library's code are written to the log the record names; ctxbench's own warnings stay on the
terminal; outside a session the library prints as before."""

from __future__ import annotations

import json
import logging

from ctxbench.harness import cli, run_log


def test_a_library_handler_and_warning_go_to_the_log(monkeypatch, capsys):
    monkeypatch.setattr(run_log, "THIRD_PARTY", ("fakelib_for_run_log",))
    with run_log.third_party_log() as path:
        lib = logging.getLogger("fakelib_for_run_log")  # made during the session, as transformers makes its own
        lib.propagate = False
        lib.addHandler(logging.StreamHandler())  # the library's terminal handler
        lib.warning("Loading a GGUF checkpoint ... dtype notice")
        cli._warn_one_line("a deprecated thing", UserWarning, "/usr/lib/python3/site-packages/fakelib/x.py", 3)
        cli._warn_one_line("a skipped corrupt line", UserWarning, run_log.__file__, 1)  # ctxbench's own
        text = path.read_text()
    err = capsys.readouterr().err
    assert "dtype notice" not in err and "deprecated thing" not in err and "a skipped corrupt line" in err
    assert "dtype notice" in text and "UserWarning: a deprecated thing" in text
    lib.warning("after the session")
    assert "after the session" in capsys.readouterr().err


def test_the_record_names_the_log_beside_the_run(ctxbench, tmp_path):
    store = tmp_path / "runs"
    code, _, err = ctxbench("score", "--backend", "echo", "--tasks", "ruler/niah_single_1", "--lengths", "512",
                            "--samples", "1", "--store", str(store))
    assert code == 0, err[-2000:]
    (record,) = store.glob("*/record.json")
    log = json.loads(record.read_text())["sessions"][-1]["execution"]["log"]
    assert log.startswith("logs/") and (record.parent / log).is_file()
