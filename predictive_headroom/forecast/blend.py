"""Prophet's validated blend with seasonal naive: what validation picks and how it combines.

`ProphetForecaster` forecasts a held-out window with both models and picks, by mean absolute
error, Prophet's weight against seasonal naive and the share of Prophet's recent residual level
added back (see its docstring for the measurements behind these choices).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Candidate weights of Prophet against seasonal naive."""
LEVELS = (0.0, 0.5, 1.0)
"""Candidate shares of the recent residual level added to Prophet."""


@dataclass(frozen=True)
class Choice:
    """What validation picked: Prophet's weight against seasonal naive, the share of the recent
    residual level added to Prophet, and the blend's errors (actual - forecast) on the validation window."""

    weight: float
    level_share: float
    errors: np.ndarray

    def combine(
        self, prophet: np.ndarray, level: float | np.ndarray, naive: np.ndarray
    ) -> np.ndarray:
        """The blended forecast: weighted Prophet (plus its share of the level) and seasonal naive."""
        return self.weight * (prophet + self.level_share * level) + (1 - self.weight) * naive


def choose(actual: np.ndarray, prophet: np.ndarray, level: np.ndarray, naive: np.ndarray) -> Choice:
    """The (weight, level share) whose blend has the lowest mean absolute error on `actual`.

    Ties go to plain Prophet (weight 1, no level correction) first.
    """
    candidates = [Choice(w, share, np.empty(0)) for w in reversed(WEIGHTS) for share in LEVELS]
    maes = [float(np.mean(np.abs(actual - c.combine(prophet, level, naive)))) for c in candidates]
    best = candidates[int(np.argmin(maes))]
    return Choice(best.weight, best.level_share, actual - best.combine(prophet, level, naive))


def abs_quantile(errors: np.ndarray, width: float) -> float:
    """The `width` quantile of |errors| (0 when there are none)."""
    ok = np.abs(errors[np.isfinite(errors)])
    return float(np.quantile(ok, width)) if ok.size else 0.0


def recent_level(times: np.ndarray, residuals: np.ndarray, seconds: float) -> float:
    """Mean residual over the last `seconds` of the history (0 when there is none)."""
    recent = residuals[(times > times[-1] - seconds) & np.isfinite(residuals)]
    return float(recent.mean()) if recent.size else 0.0
