"""Writes four devices' own rows for the local-data tests: DIR/d{i}.csv (1,000 x (i+1) rows) and
DIR/e{i}.csv (held-out, 100 + 50 i rows x SCALE), a 3-class problem in 20 features with a label
mix of its own per device. Usage: local_data.py DIR [EVAL_SCALE]."""
import sys

import numpy as np

rng = np.random.default_rng(7)
centres = rng.normal(0, 1.0, (3, 20))
scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def rows(n, mix):
    y = rng.choice(3, size=n, p=mix)
    return np.column_stack([centres[y] + rng.normal(0, 1.6, (n, 20)), y])


mixes = [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6], [0.34, 0.33, 0.33]]
header = ",".join([f"f{j}" for j in range(20)] + ["label"])
fmt = ["%.5f"] * 20 + ["%d"]
for i, n in enumerate([1000, 2000, 3000, 4000]):
    for name, count in ((f"d{i}", n), (f"e{i}", (100 + 50 * i) * scale)):
        np.savetxt(f"{sys.argv[1]}/{name}.csv", rows(count, mixes[i]), delimiter=",",
                   header=header, comments="", fmt=fmt)
