"""PNG plots of the cold-start and skew studies. matplotlib is optional: imported only here, only when asked."""

from __future__ import annotations

import math
from pathlib import Path

from dynbsz.errors import ConfigError
from dynbsz.paths import cache_dir
from dynbsz.tables import budget_label


class MissingMatplotlib(ConfigError):
    """A plot was asked for and matplotlib is not installed: a named ``--plot`` stops on it, the cold-start
    study's default plot only says so."""


#: How to get what a plot needs, for the messages that say it is missing.
INSTALL_HINT = "pip install matplotlib, or bash ci/install.sh --plot"


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingMatplotlib("--plot needs matplotlib, which is not installed: pip install matplotlib "
                                "(or drop --plot)") from None
    return plt


def default_dir() -> Path:
    """Where a plot nobody named goes: the project's cache, because the working directory is often a checkout
    and a file appearing in it unasked would end up committed."""
    return cache_dir()


def check_path(path) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ConfigError(f"--plot writes a PNG file; give a path ending in .png, got {str(path)!r}")
    return path


def cold_start(rows, path) -> Path:
    """Per budget: ready time p50 (log scale) and steady-state fill against DP size, one line per gate."""
    path = check_path(path)
    plt = _pyplot()
    budgets = list(dict.fromkeys(r.budget for r in rows))
    gates = list(dict.fromkeys(r.gate for r in rows))
    fig, axes = plt.subplots(2, len(budgets), figsize=(3.6 * len(budgets), 6.4), squeeze=False, sharex=True)
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v", "x", "+"]
    dps = sorted({r.dp for r in rows})
    for j, b in enumerate(budgets):
        top, bottom = axes[0][j], axes[1][j]
        for gi, g in enumerate(gates):
            pts = sorted((r.dp, r.ready_p50_s, r.steady_fill) for r in rows
                         if r.budget == b and r.gate == g and r.error is None)
            if not pts:
                continue
            dp = [p[0] for p in pts]
            # Distinct line style and marker per gate: equal policies (fixed:24, context_aware) overlap exactly.
            style = dict(color=f"C{gi % 10}", linestyle=styles[gi % len(styles)], marker=markers[gi % len(markers)],
                         label=g)
            top.plot(dp, [p[1] for p in pts], **style)
            bottom.plot(dp, [100 * p[2] if not math.isnan(p[2]) else math.nan for p in pts], **style)
        top.set_title(f"budget {budget_label(b)}")
        top.set_yscale("log")
        top.set_xscale("log", base=2)
        bottom.set_xticks(dps, [str(d) for d in dps])
        bottom.set_xlabel("DP size")
        if j == 0:
            top.set_ylabel("first micro-batch ready, p50 (s)")
            bottom.set_ylabel("steady-state global fill (%)")
        top.grid(alpha=0.3)
        bottom.grid(alpha=0.3)
    # every gate's line from whichever panel drew it: a gate that fails closed at the last budget
    # (context_aware off 512K/1M) would otherwise be missing from the legend
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    axes[0][-1].legend(list(handles.values()), list(handles), fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def skew(results, names, window: int, path) -> Path:
    """Per-source share over windows of steps, one panel per setting (in_order=True, False, balanced), plus
    the overall mix."""
    path = check_path(path)
    plt = _pyplot()
    cols = min(2, len(results))
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.4 * rows), squeeze=False, sharey=True)
    flat = [ax for row in axes for ax in row]
    for ax, res in zip(flat, results):
        for i, name in enumerate(names):
            line, = ax.plot(res.shares[:, i], label=name)
            ax.axhline(res.overall[i], color=line.get_color(), linestyle=":", linewidth=1)
        ax.set_title(f"{res.mode}: share shift vs sampler {res.shift:.3f}, "
                     f"mean displacement {res.displacement['mean']:.1f}", fontsize=10)
        ax.set_xlabel(f"window of {window} steps")
        ax.grid(alpha=0.3)
    for ax in flat[len(results):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("share of samples")
    flat[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def policy(result: dict, hours, path) -> Path:
    """Per hour: the advised gate's, fixed:200's and context_aware's tokens over the best fixed size, per point."""
    path = check_path(path)
    plt = _pyplot()
    best = result["best"]
    keys = [f"{h:g}" for h in hours]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 4.0), squeeze=False, sharey=True)
    labels = [f"{e['workload']} {budget_label(e['budget'])} dp{e['dp']}" for e in best]
    x = list(range(len(best)))
    for j, k in enumerate(keys):
        ax = axes[0][j]
        for name, field, marker in (("advised", "advised_ratio", "o"), ("fixed:200", "fixed_200_ratio", "x"),
                                    ("context_aware", "context_aware_ratio", "^")):
            ys = [e[field][k] if e.get(field) else math.nan for e in best]
            ax.plot(x, ys, marker=marker, linestyle="none", label=name)
        ax.axhline(0.99, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(f"tokens by hour {k} / best fixed size")
        ax.set_xticks(x, labels, rotation=90, fontsize=5)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
