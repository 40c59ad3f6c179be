"""The latency verdict's bootstrap over time bins (domain.verdict): seeded resampling weights, kept for a
fleet's verdicts over one window, the resampled histograms' columns as a verdict asks for them, and numpy's
own percentiles at a fraction of the cost."""

from __future__ import annotations

import functools
import math

import numpy as np


def draw_counts(rng: np.random.Generator, n_rows: int, n_boot: int) -> np.ndarray:
    """(n_boot, n_rows) counts of how often each time bin is drawn in each with-replacement resample."""
    idx = rng.integers(0, n_rows, size=(n_boot, n_rows)) + n_rows * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n_rows).reshape(n_boot, n_rows).astype(float)


CACHED_WEIGHTS = 4  # weight pairs kept (a fleet's verdicts over one window share one or two shapes)
CACHED_CELLS = 400_000  # largest n_boot x rows of a side kept (1,000 x 400: 3.2 MB); longer ones are drawn anew


def resample_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap's weights for both sides: a generator seeded with `seed` draws spec's, then the
    baseline's. They depend on nothing but these four numbers, so a fleet's verdicts over one window (every
    pair has the same number of time bins) draw them once: a few pairs are kept, read-only."""
    if max(n_spec, n_base) * n_boot > CACHED_CELLS:
        return _draw_weights(seed, n_spec, n_base, n_boot)
    return _cached_weights(seed, n_spec, n_base, n_boot)


def _draw_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return draw_counts(rng, n_spec, n_boot), draw_counts(rng, n_base, n_boot)


@functools.lru_cache(maxsize=CACHED_WEIGHTS)
def _cached_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    pair = _draw_weights(seed, n_spec, n_base, n_boot)
    for w in pair:
        w.flags.writeable = False
    return pair


class Resampled:
    """Both sides' bootstrap resamples, drawn on first use from a generator seeded with `seed`: spec's
    weights first, then the baseline's. A verdict reads two or three columns of a side's resampled
    histograms (an edge's cumulative count and the total), so columns are computed as they are asked for:
    when every time bin's row is already cumulative (non-decreasing), so is every weighted sum of rows, and
    the running maximum histogram_quantile applies changes nothing, so a column is one matrix-vector
    product (n_boot x bins). A side with a non-monotone row gets the whole matrix and its running maximum."""

    def __init__(self, s_arr: np.ndarray, b_arr: np.ndarray, *, seed: int, n_boot: int) -> None:
        self.s_arr, self.b_arr, self.seed, self.n_boot = s_arr, b_arr, seed, n_boot
        self._weights: tuple[np.ndarray, np.ndarray] | None = None
        self._full: dict[int, np.ndarray | None] = {}  # per side: None while its rows are cumulative
        self._cols: dict[tuple[int, int], np.ndarray] = {}
        self._whole: dict[int, np.ndarray] = {}

    def _arr(self, side: int) -> np.ndarray:
        return self.s_arr if side == 0 else self.b_arr

    def column(self, side: int, j: int) -> np.ndarray:
        """Resampled cumulative counts at `le` index j (negative: from the end) of side 0 (spec) or 1
        (baseline), after the running maximum: (n_boot,)."""
        arr = self._arr(side)
        key = (side, j % arr.shape[1])
        if key not in self._cols:
            if self._weights is None:
                self._weights = resample_weights(self.seed, len(self.s_arr), len(self.b_arr), self.n_boot)
            w = self._weights[side]
            if side not in self._full:  # once per side: the whole product only for a non-monotone row
                monotone = arr.shape[1] < 2 or bool((arr[:, 1:] >= arr[:, :-1]).all())
                self._full[side] = None if monotone else running_max(w @ arr)
            full = self._full[side]
            self._cols[key] = w @ arr[:, key[1]] if full is None else full[:, key[1]]
        return self._cols[key]

    def whole(self, side: int) -> np.ndarray:
        """The side's window histogram (every bin summed), after the running maximum: (le,)."""
        if side not in self._whole:
            self._whole[side] = np.maximum.accumulate(self._arr(side).sum(axis=0))
        return self._whole[side]


def running_max(a: np.ndarray) -> np.ndarray:
    """np.maximum.accumulate(a, axis=1) for a tall, narrow array (resamples x le), the same values: one
    vectorised maximum per column instead of numpy's accumulate along short rows (3x slower at 1000 x 20)."""
    out = a.copy()
    for j in range(1, out.shape[1]):
        np.maximum(out[:, j - 1], out[:, j], out=out[:, j])
    return out


def linear_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """np.quantile(x, probs) (method "linear") of a 1-D array without NaN, the same floats (numpy's virtual
    index (n - 1) p, its floor and neighbour, and its two-sided lerp), at a fraction of the cost: only the
    order statistics the probabilities fall between are placed (np.partition, not a whole sort), and the
    few interpolations are float arithmetic, the same IEEE operations numpy does. x must not be empty."""
    n = x.size
    spots = []
    for p in probs.tolist():
        virtual = (n - 1) * p
        prev = math.floor(virtual)
        top = virtual >= n - 1  # numpy takes the last value there
        spots.append((n - 1 if top else prev, n - 1 if top else prev + 1, virtual - prev))
    s = np.partition(x, sorted({i for a, b, _ in spots for i in (a, b)}))
    out = []
    for i, j, t in spots:
        a, b = float(s[i]), float(s[j])
        d = b - a
        out.append(b - d * (1 - t) if t >= 0.5 else a + d * t)
    return np.array(out)
