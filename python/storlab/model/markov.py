"""Mean time to absorption of small continuous-time Markov chains, solved exactly in rationals.

Used for MTTDL: transient states are "k drives failed", the absorbing state is data loss. The mean
times T solve (diag(total out-rate) - Q_transient) T = 1 (one equation per transient state); the
chains have at most a handful of states, so exact Gaussian elimination on Fractions is cheap and
avoids the cancellation a float solve would suffer when rates differ by many orders of magnitude.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

__all__ = ["solve_linear", "mean_time_to_absorption", "birth_death_chain"]


def solve_linear(matrix: Sequence[Sequence[Fraction]], rhs: Sequence[Fraction]) -> list[Fraction]:
    """Solve A x = b exactly by Gaussian elimination (pivot on the first non-zero entry)."""
    n = len(matrix)
    a = [list(map(Fraction, row)) + [Fraction(rhs[i])] for i, row in enumerate(matrix)]
    for column in range(n):
        pivot = next((r for r in range(column, n) if a[r][column] != 0), None)
        if pivot is None:
            raise ZeroDivisionError("singular system: some state never reaches the absorbing state")
        a[column], a[pivot] = a[pivot], a[column]
        for r in range(n):
            if r != column and a[r][column] != 0:
                factor = a[r][column] / a[column][column]
                a[r] = [x - factor * y for x, y in zip(a[r], a[column])]
    return [a[i][n] / a[i][i] for i in range(n)]


def mean_time_to_absorption(transition_rates: Sequence[Sequence[float | Fraction]],
                            absorption_rates: Sequence[float | Fraction]) -> list[float]:
    """Expected time to absorption from each transient state.

    transition_rates[i][j]: rate from transient state i to transient state j (diagonal ignored);
    absorption_rates[i]: rate from state i straight to the absorbing state.
    """
    n = len(absorption_rates)
    rates = [[Fraction(transition_rates[i][j]) if i != j else Fraction(0) for j in range(n)] for i in range(n)]
    out = [sum(rates[i]) + Fraction(absorption_rates[i]) for i in range(n)]
    matrix = [[out[i] if i == j else -rates[i][j] for j in range(n)] for i in range(n)]
    return [float(t) for t in solve_linear(matrix, [Fraction(1)] * n)]


def birth_death_chain(drives: int, fault_tolerance: int, failure_rate: float, repair_rate: float,
                      ure_probability_by_state: Sequence[float] | None = None
                      ) -> tuple[list[list[Fraction]], list[Fraction]]:
    """The standard RAID chain: state k = failed drives (0..m). Failures at (N - k) lambda move k to
    k + 1 (to data loss from k = m); one rebuild at a time at mu moves k to k - 1, except that with
    probability h_k the rebuild hits an unrecoverable read error, which is data loss."""
    m = fault_tolerance
    if m < 0 or drives <= m:
        raise ValueError(f"a group of {drives} drives cannot tolerate {m} failures")
    h = list(ure_probability_by_state or [0.0] * (m + 1))
    if len(h) != m + 1:
        raise ValueError("one URE probability per state 0..m is needed")
    lam, mu = Fraction(failure_rate), Fraction(repair_rate)
    rates = [[Fraction(0)] * (m + 1) for _ in range(m + 1)]
    absorb = [Fraction(0)] * (m + 1)
    for k in range(m + 1):
        failing = (drives - k) * lam
        if k < m:
            rates[k][k + 1] += failing
        else:
            absorb[k] += failing
        if k > 0:
            h_k = Fraction(h[k])
            rates[k][k - 1] += mu * (1 - h_k)
            absorb[k] += mu * h_k
    return rates, absorb
