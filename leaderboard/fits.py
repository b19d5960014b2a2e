"""Scaling-law fits of validation loss against training tokens (Quest, Section 5).

Two forms per group (a model size): Quest's L(D) = α·exp(−β·D) + γ and the power law
L(D) = A·D^(−a) + E. D is divided by its largest fitted value before fitting (exp(−β·4e9) is
hopeless for an optimiser in raw units); parameters are reported back in token units, with
standard errors from the covariance (delta method where a parameter is rescaled). Starting points
come from a small grid over the one non-linear parameter with the two linear ones solved exactly,
so the fit does not depend on a lucky p0. A fit that cannot be trusted (too few points, no
convergence, infinite covariance) carries a message instead of NaNs.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ctxbench.harness.core.io import atomic_write, jsonable

FORMS: dict[str, tuple[str, ...]] = {"exp": ("alpha", "beta", "gamma"), "power": ("A", "a", "E")}
FORMULAS = {"exp": "L(D) = α·exp(−β·D) + γ", "power": "L(D) = A·D^(−a) + E"}
SYMBOLS = {"alpha": "α", "beta": "β", "gamma": "γ", "A": "A", "a": "a", "E": "E"}
_GRID = {"exp": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0), "power": (0.05, 0.15, 0.4, 1.0, 2.0)}
_UPPER = {"exp": (np.inf, 1e3, np.inf), "power": (np.inf, 10.0, np.inf)}


@dataclass(frozen=True)
class CurveFit:
    """One fitted form for one group; ``ok`` False means ``message`` says why and params are empty."""

    group: str
    form: str
    ok: bool
    message: str = ""
    params: dict[str, float] = field(default_factory=dict)  # in token units
    stderr: dict[str, float] = field(default_factory=dict)
    n_points: int = 0
    rmse: float = math.nan
    scale: float = 1.0  # D was divided by this before fitting

    def predict(self, tokens) -> np.ndarray:
        if not self.ok:
            raise ValueError(f"{self.group} {self.form}: no usable fit ({self.message})")
        d = np.asarray(tokens, dtype=float)
        p = self.params
        if self.form == "exp":
            return p["alpha"] * np.exp(-p["beta"] * d) + p["gamma"]
        return p["A"] * np.power(d, -p["a"]) + p["E"]


@dataclass(frozen=True)
class HeldOut:
    """A point kept out of the fit and predicted by it; rel_error = (predicted − loss) / loss."""

    group: str
    form: str
    tokens: float
    loss: float
    predicted: float
    rel_error: float


@dataclass(frozen=True)
class FitResult:
    fits: tuple[CurveFit, ...]
    heldout: tuple[HeldOut, ...]
    frame: pd.DataFrame  # the points, with a boolean 'heldout' column


def _basis(form: str, x: np.ndarray, k: float) -> np.ndarray:
    return np.exp(-k * x) if form == "exp" else np.power(x, -k)


def _model(form: str):
    def f(x, c, k, floor):
        return c * _basis(form, x, k) + floor

    return f


def _start(form: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Best (c, k, floor) over a grid of k, solving c and floor by non-negative-ish least squares."""
    best, best_sse = (max(y.max() - y.min(), 1e-3), _GRID[form][2], max(y.min() * 0.9, 0.0)), math.inf
    for k in _GRID[form]:
        basis = np.column_stack([_basis(form, x, k), np.ones_like(x)])
        (c, floor), *_ = np.linalg.lstsq(basis, y, rcond=None)
        c, floor = max(c, 1e-6), min(max(floor, 0.0), y.min())
        sse = float(np.sum((c * basis[:, 0] + floor - y) ** 2))
        if sse < best_sse:
            best, best_sse = (c, k, floor), sse
    return best


def fit_curve(tokens: Sequence[float], losses: Sequence[float], *, form: str = "exp", group: str = "",
              max_nfev: int = 20000) -> CurveFit:
    """Fit one form to (tokens, loss) points; never raises on bad data, returns ok=False with a message."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    from scipy.optimize import OptimizeWarning, curve_fit

    d, y = np.asarray(tokens, dtype=float), np.asarray(losses, dtype=float)
    keep = np.isfinite(d) & np.isfinite(y) & (d > 0)
    d, y = d[keep], y[keep]
    need = len(FORMS[form]) + 1
    distinct = len(np.unique(d))
    if distinct < need:
        return CurveFit(group, form, False, f"too few points: the {form} form has {need - 1} parameters and needs at "
                        f"least {need} distinct token counts, got {distinct}", n_points=len(d))
    scale = float(d.max())
    x = d / scale
    p0 = _start(form, x, y)
    upper = _UPPER[form]
    p0 = tuple(min(max(v, 0.0), u * 0.999 if np.isfinite(u) else v) for v, u in zip(p0, upper))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", OptimizeWarning)
            popt, pcov = curve_fit(_model(form), x, y, p0=p0, bounds=((0.0, 0.0, 0.0), upper), max_nfev=max_nfev)
    except OptimizeWarning:
        return CurveFit(group, form, False, "infinite covariance: the parameters are not identifiable from these points; "
                        "add points that span more of the curve", n_points=len(d), scale=scale)
    except (RuntimeError, ValueError) as e:
        return CurveFit(group, form, False, f"did not converge ({str(e).splitlines()[0][:120]})", n_points=len(d), scale=scale)
    if not np.all(np.isfinite(popt)) or not np.all(np.isfinite(np.diag(pcov))):
        return CurveFit(group, form, False, "infinite covariance: the parameters are not identifiable from these points; "
                        "add points that span more of the curve", n_points=len(d), scale=scale)
    c, k, floor = (float(v) for v in popt)
    rmse = float(np.sqrt(np.mean((_model(form)(x, *popt) - y) ** 2)))
    if form == "exp":  # β_D = k / scale
        jac = np.diag([1.0, 1.0 / scale, 1.0])
        params = {"alpha": c, "beta": k / scale, "gamma": floor}
    else:  # A_D = c · scale^k
        s_k = scale**k
        jac = np.array([[s_k, c * s_k * math.log(scale), 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        params = {"A": c * s_k, "a": k, "E": floor}
    cov = jac @ pcov @ jac.T
    err = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    if not np.all(np.isfinite(err)):
        return CurveFit(group, form, False, "infinite covariance after rescaling to token units", n_points=len(d), scale=scale)
    stderr = dict(zip(FORMS[form], (float(e) for e in err)))
    loose = [SYMBOLS[p] for p in FORMS[form] if stderr[p] > abs(params[p])]
    note = f"poorly determined: {', '.join(loose)} (standard error > |value|)" if loose else ""
    return CurveFit(group, form, True, note, params, stderr, len(d), rmse, scale)


def fit_frame(df: pd.DataFrame, *, forms: Sequence[str] = ("exp", "power"), holdout: str | float = "largest") -> FitResult:
    """Fit every group of a (group, tokens, loss) frame; hold out its largest D (or D > a threshold) and predict it.

    holdout: "largest" (each group's largest token count), "none", or a token count (points above it).
    """
    missing = {"group", "tokens", "loss"} - set(df.columns)
    if missing:
        raise ValueError(f"fit frame needs columns group, tokens, loss; missing {', '.join(sorted(missing))}")
    frame = df.copy()
    frame["group"] = frame["group"].astype(str)
    frame["heldout"] = False
    fits, held = [], []
    for group, rows in frame.groupby("group", sort=True):
        if holdout == "none" or (holdout == "largest" and rows["tokens"].nunique() < 2):
            mask = pd.Series(False, index=rows.index)
        elif holdout == "largest":
            mask = rows["tokens"] == rows["tokens"].max()
        else:
            mask = rows["tokens"] > float(holdout)
        frame.loc[rows.index[mask.to_numpy()], "heldout"] = True
        train, test = rows[~mask], rows[mask]
        for form in forms:
            fit = fit_curve(train["tokens"], train["loss"], form=form, group=str(group))
            fits.append(fit)
            if fit.ok:
                for t, y in zip(test["tokens"], test["loss"]):
                    pred = float(fit.predict(float(t)))
                    held.append(HeldOut(str(group), form, float(t), float(y), pred, (pred - float(y)) / float(y)))
    return FitResult(tuple(fits), tuple(held), frame)


def read_points_csv(path: Path) -> pd.DataFrame:
    """A CSV with a group column (model, size or group), tokens (or D) and loss."""
    df = pd.read_csv(path)
    cols = {c.lower().strip(): c for c in df.columns}
    group = next((cols[c] for c in ("group", "model", "size") if c in cols), None)
    tokens = next((cols[c] for c in ("tokens", "d") if c in cols), None)
    loss = next((cols[c] for c in ("loss", "val_loss", "eval_loss") if c in cols), None)
    if tokens is None or loss is None:
        raise ValueError(f"{path}: needs columns tokens (or D) and loss, plus model/size/group; has {', '.join(df.columns)}")
    out = pd.DataFrame({"group": df[group].astype(str) if group else "all", "tokens": pd.to_numeric(df[tokens], errors="coerce"),
                        "loss": pd.to_numeric(df[loss], errors="coerce")})
    bad = out["tokens"].isna() | out["loss"].isna()
    if bad.any():
        raise ValueError(f"{path}: row {int(np.flatnonzero(bad.to_numpy())[0]) + 2} has a non-numeric tokens or loss value")
    return out


def _num(v: float) -> str:
    return f"{v:.4g}"


def _param_rows(fits: Sequence[CurveFit]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for f in fits:
        if not f.ok:
            rows.append((f.group, f.form, "—", "—", "—", str(f.n_points), "—", f"no fit: {f.message}"))
            continue
        cells = tuple(f"{SYMBOLS[p]} = {_num(f.params[p])} ± {_num(f.stderr[p])}" for p in FORMS[f.form])
        rows.append((f.group, f.form, *cells, str(f.n_points), _num(f.rmse), f.message))
    return tuple(rows)


def _plot(group: str, frame: pd.DataFrame, fits: Sequence[CurveFit]) -> bytes:
    from .plots import _figure, _png, plot_label

    fig = _figure(5.6, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    fitted, held = frame[~frame["heldout"]], frame[frame["heldout"]]
    ax.scatter(fitted["tokens"], fitted["loss"], color="black", s=18, zorder=3, label="fitted points")
    if len(held):
        ax.scatter(held["tokens"], held["loss"], facecolors="none", edgecolors="red", s=40, zorder=3, label="held out")
    grid = np.geomspace(frame["tokens"].min() * 0.8, frame["tokens"].max() * 1.25, 200)
    for f, style in zip(fits, ("-", "--", ":")):
        if f.ok:
            ax.plot(grid, f.predict(grid), style, label=plot_label(f"{f.form}: {FORMULAS[f.form]}"))
    ax.set_xscale("log")
    ax.set_xlabel("training tokens D")
    ax.set_ylabel("validation loss")
    ax.set_title(plot_label(group))
    ax.legend(fontsize=7)
    return _png(fig)


def write_fit_report(result: FitResult, out_dir: Path, *, title: str = "Scaling-law fits", source: str = "") -> dict[str, Path]:
    """fit.md, fit.html (self-contained, plots inline) and fit.json; all text is escaped by the renderer."""
    from .render import Figure, Section, Table, render_html, render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    preamble = (
        f"Forms: {FORMULAS['exp']} (Quest) and {FORMULAS['power']}; D in tokens, fitted on D / max(D) and reported in "
        "token units. ± is one standard error (square root of the covariance diagonal).",
        *((f"Points: {source}.",) if source else ()),
    )
    params = Table(("group", "form", "p1", "p2", "p3", "points", "RMSE", "note"), _param_rows(result.fits))
    sections = [Section("Fitted parameters", tables=(params,))]
    if result.heldout:
        rows = tuple((h.group, h.form, _num(h.tokens), f"{h.loss:.4f}", f"{h.predicted:.4f}", f"{100 * h.rel_error:+.2f}%")
                     for h in result.heldout)
        sections.append(Section("Held-out predictions", tables=(Table(("group", "form", "D", "loss", "predicted",
                                                                        "relative error"), rows),),
                                paragraphs=("Each held-out point was excluded from the fit; relative error = "
                                            "(predicted − actual) / actual.",)))
    figures = tuple(Figure(_plot(g, rows, [f for f in result.fits if f.group == g]), f"fitted curves, {g}")
                    for g, rows in result.frame.groupby("group", sort=True))
    sections.append(Section("Curves", figures=figures, markdown=False))
    paths = {"markdown": out / "fit.md", "html": out / "fit.html", "json": out / "fit.json"}
    atomic_write(paths["markdown"], render_markdown(title, sections, preamble=(*preamble, "Plots are in fit.html.")))
    atomic_write(paths["html"], render_html(title, sections, preamble=preamble))
    payload = {"fits": [asdict(f) for f in result.fits], "heldout": [asdict(h) for h in result.heldout],
               "points": result.frame.to_dict(orient="records")}
    atomic_write(paths["json"], json.dumps(jsonable(payload), indent=2, allow_nan=False) + "\n")
    return paths
