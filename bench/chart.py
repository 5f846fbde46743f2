"""The chart of bench/RESULTS.md: batch latency per peer and network (matplotlib, bench venv)."""


def chart(res, png_path, peers, labels, networks):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8))
    width = 0.26
    colours = {"naive": "#9e9e9e", "sqsafe": "#1f77b4", "powertools": "#ff7f0e"}
    for i, p in enumerate(peers):
        p50, p99, xs = [], [], []
        for j, (backend, latency) in enumerate(networks):
            r = res.run(p, backend=backend, latency=latency)
            if r:
                xs.append(j + (i - 1) * width)
                p50.append(r["duration"]["p50_ms"])
                p99.append(r["duration"]["p99_ms"])
        bars = ax.bar(xs, p50, width, label=f"{labels[p]} p50", color=colours[p])
        ax.bar_label(bars, labels=[f"{v:.1f}" if v < 10 else f"{v:.0f}" for v in p50], fontsize=7, padding=1)
        ax.scatter(xs, p99, marker="_", s=300, color="black", zorder=3, label="p99" if i == 0 else None)
    ax.set_xticks(range(len(networks)))
    ax.set_xticklabels([f"{b}, +{l} ms" for b, l in networks])
    ax.set_yscale("log")
    ax.set_ylabel("batch of 10 fresh payments, ms (log scale)")
    ax.set_title("Batch latency per peer: invoke to answer")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=4, frameon=False)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
