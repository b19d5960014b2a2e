"""Scaling-law fits: recover known parameters, predict held-out points, explain bad fits, report files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ctxbench.leaderboard.fits import fit_curve, fit_frame, read_points_csv, write_fit_report

# Quest's data sizes (250M .. 4B tokens) plus the 8B point it predicts.
QUEST_D = np.array([2.5e8, 5e8, 1e9, 2e9, 4e9])


def exp_loss(d, alpha=2.0, beta=5e-10, gamma=1.8):
    return alpha * np.exp(-beta * d) + gamma


def power_loss(d, A=50.0, a=0.3, E=1.5):
    return A * np.power(d, -a) + E


def test_exp_form_recovers_parameters():
    d = np.geomspace(2.5e8, 4e9, 8)
    rng = np.random.default_rng(0)
    fit = fit_curve(d, exp_loss(d) + rng.normal(0, 5e-4, d.size), form="exp")
    assert fit.ok, fit.message
    assert fit.params["alpha"] == pytest.approx(2.0, rel=0.02)
    assert fit.params["beta"] == pytest.approx(5e-10, rel=0.02)
    assert fit.params["gamma"] == pytest.approx(1.8, rel=0.01)
    assert all(0 < fit.stderr[p] < abs(fit.params[p]) for p in fit.params)  # finite, meaningful uncertainties


def test_power_form_recovers_parameters():
    d = np.geomspace(1e7, 1e10, 10)
    fit = fit_curve(d, power_loss(d), form="power")
    assert fit.ok, fit.message
    assert fit.params["A"] == pytest.approx(50.0, rel=0.02)
    assert fit.params["a"] == pytest.approx(0.3, rel=0.01)
    assert fit.params["E"] == pytest.approx(1.5, rel=0.01)


def test_quest_protocol_heldout_relative_error():
    """Fit on 250M..4B for two sizes, predict 8B: the relative error is reported and small for the true form."""
    d = np.append(QUEST_D, 8e9)
    df = pd.concat([pd.DataFrame({"group": "1.4B", "tokens": d, "loss": exp_loss(d)}),
                    pd.DataFrame({"group": "6.9B", "tokens": d, "loss": exp_loss(d, 1.5, 4e-10, 1.6)})])
    result = fit_frame(df, forms=("exp", "power"), holdout="largest")
    held = {(h.group, h.form): h for h in result.heldout}
    assert set(held) == {("1.4B", "exp"), ("1.4B", "power"), ("6.9B", "exp"), ("6.9B", "power")}
    h = held[("1.4B", "exp")]
    assert h.tokens == 8e9 and h.rel_error == pytest.approx((h.predicted - h.loss) / h.loss)
    assert abs(held[("1.4B", "exp")].rel_error) < 1e-3 and abs(held[("6.9B", "exp")].rel_error) < 1e-3
    assert result.frame["heldout"].sum() == 2


def test_too_few_points_gives_a_message_not_nans():
    fit = fit_curve(QUEST_D[:3], exp_loss(QUEST_D[:3]), form="exp")
    assert not fit.ok and "too few points" in fit.message and "at least 4" in fit.message
    assert fit.params == {}
    with pytest.raises(ValueError, match="no usable fit"):
        fit.predict(1e9)


def test_non_convergence_and_infinite_covariance_are_explained(monkeypatch):
    d = np.geomspace(1e8, 1e10, 6)
    fit = fit_curve(d, power_loss(d) + np.sin(d), form="exp", max_nfev=1)
    assert not fit.ok and "did not converge" in fit.message

    import scipy.optimize

    monkeypatch.setattr(scipy.optimize, "curve_fit", lambda *a, **k: (np.ones(3), np.full((3, 3), np.inf)))
    fit = fit_curve(d, power_loss(d), form="power")
    assert not fit.ok and "infinite covariance" in fit.message


def test_report_files_escape_and_show_failures(tmp_path):
    d = np.append(QUEST_D, 8e9)
    df = pd.concat([pd.DataFrame({"group": "<b>1.4B|x</b>", "tokens": d, "loss": exp_loss(d)}),
                    pd.DataFrame({"group": "tiny", "tokens": QUEST_D[:3], "loss": exp_loss(QUEST_D[:3])})])
    paths = write_fit_report(fit_frame(df), tmp_path, title="fits <script>")
    md, html = paths["markdown"].read_text(), paths["html"].read_text()
    assert "<script>" not in md and "<script>" not in html and "&lt;b&gt;1.4B" in html
    assert "no fit: too few points" in md and "nan" not in md.lower()
    assert "Held-out predictions" in md and "data:image/png;base64," in html
    payload = json.loads(paths["json"].read_text())
    assert {f["form"] for f in payload["fits"]} == {"exp", "power"} and payload["heldout"]


def test_points_csv(tmp_path):
    csv = tmp_path / "points.csv"
    csv.write_text("size,tokens,loss\n1.4B,250000000,3.1\n1.4B,500000000,2.9\n")
    df = read_points_csv(csv)
    assert list(df.columns) == ["group", "tokens", "loss"] and df["group"].tolist() == ["1.4B", "1.4B"]
    (tmp_path / "bad.csv").write_text("model,steps,loss\na,1,2\n")
    with pytest.raises(ValueError, match="tokens"):
        read_points_csv(tmp_path / "bad.csv")


@pytest.fixture()
def run_cli(ctxbench, monkeypatch):
    """run_cli(*args, cwd=...): the CLI through its main() in this process, in cwd (no Python start-up per command); the
    result reads as a finished process's (returncode, stdout, stderr)."""
    from types import SimpleNamespace

    def run(*args: str, cwd) -> SimpleNamespace:
        monkeypatch.chdir(cwd)
        code, out, err = ctxbench(*args)
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def test_fit_cli_from_csv_and_clear_errors(tmp_path, repo_root, run_cli):
    d = np.append(QUEST_D, 8e9)
    pd.DataFrame({"model": "1.4B", "tokens": d, "loss": exp_loss(d)}).to_csv(tmp_path / "pts.csv", index=False)
    res = run_cli("fit", "--csv", str(tmp_path / "pts.csv"), "--out", str(tmp_path / "fit"), cwd=repo_root)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "fit" / "fit.md").exists() and (tmp_path / "fit" / "fit.html").exists()
    assert "%" in res.stdout  # the held-out relative error is printed
    res = run_cli("fit", "--store", str(tmp_path / "empty"), cwd=repo_root)
    assert res.returncode == 2 and "Traceback" not in res.stderr and "no eval losses" in res.stderr
    res = run_cli("fit", "--csv", str(tmp_path / "pts.csv"), "--forms", "cubic", cwd=repo_root)
    assert res.returncode == 2 and "--forms" in res.stderr
