"""Markdown tables of accuracy rows (bench/accuracy.py writes them; bench/write_results.py reads
them); no torch needed."""


def markdown(rows, names):
    """One table per metric: a row per (numerics, inputs, head dim), a column per sequence length."""
    seqs = sorted({r["seq"] for r in rows})
    metrics = (("rel_l2", "relative L2 (%)", lambda x: f"{100 * x:.3f}"),
               ("cosine", "cosine similarity", lambda x: f"{x:.6f}"),
               ("mre", "mean relative error (%)", lambda x: f"{100 * x:.3f}"),
               ("lse_max_abs_error", "LSE max |error| against float64 (nats)",
                lambda x: f"{x:.4f}"))
    lines = []
    for key, title, show in metrics:
        if not any(key in r for r in rows):
            continue
        lines += ["", f"**{title}**", "",
                  "| numerics | inputs | d | " + " | ".join(f"N={n}" for n in seqs) + " |",
                  "|---|---|---|" + "---|" * len(seqs)]
        for inputs in sorted({r["inputs"] for r in rows}):
            for d in sorted({r["head_dim"] for r in rows}):
                for name in names:
                    cells = {r["seq"]: r[key] for r in rows if r["numerics"] == name and
                             r["inputs"] == inputs and r["head_dim"] == d and key in r}
                    if cells:
                        lines.append(f"| {name} | {inputs} | {d} | " + " | ".join(
                            show(cells[n]) if n in cells else "" for n in seqs) + " |")
    return lines
