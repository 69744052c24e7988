"""The table the float64 design models print (bench/int4_families.py, bench/v_granularity_model.py):
per input family, each quantization scheme's relative L2 (%) against exact attention, every scheme
scored on the same inputs; per trial the errors of `heads` draws summed, then the median (range)
over trials."""
import numpy as np


def print_error_table(families, schemes, labels, trials, heads, draw, exact, approximate):
    """draw(family) -> the inputs of one head; exact(inputs) and approximate(scheme, inputs) ->
    its output. Prints a markdown row per family, a column per scheme (`labels`)."""
    print("| inputs | " + " | ".join(labels) + " |")
    print("| --- |" + " --- |" * len(schemes))
    for family in families:
        errors = {scheme: [] for scheme in schemes}
        for _ in range(trials):
            error = dict.fromkeys(schemes, 0.0)
            norm = 0.0
            for _ in range(heads):
                inputs = draw(family)
                reference = exact(inputs)
                norm += (reference ** 2).sum()
                for scheme in schemes:
                    error[scheme] += ((approximate(scheme, inputs) - reference) ** 2).sum()
            for scheme in schemes:
                errors[scheme].append(100 * np.sqrt(error[scheme] / norm))
        cells = []
        for scheme in schemes:
            ordered = sorted(errors[scheme])
            cells.append(f"{np.median(ordered):.2f} ({ordered[0]:.2f}-{ordered[-1]:.2f})")
        print(f"| {family} | " + " | ".join(cells) + " |", flush=True)
