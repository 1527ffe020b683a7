"""The L-BFGS wrapper: history, stopping rules, warnings."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.exceptions import ConvergenceWarning
from dpipe.solvers import minimize_lbfgs


class Quadratic:
    def __init__(self, d: int = 5) -> None:
        self.A = np.diag(np.arange(1.0, d + 1))
        self.b = np.ones(d)

    def value_and_grad(self, w):
        return 0.5 * w @ self.A @ w - self.b @ w, self.A @ w - self.b


def test_converges_with_history():
    q = Quadratic()
    res = minimize_lbfgs(q, np.zeros(5), tol=1e-10, monitor=lambda w: {"norm": float(np.linalg.norm(w))})
    np.testing.assert_allclose(res.x, 1 / np.arange(1.0, 6), rtol=1e-6)
    assert res.success and res.status == 0 and res.nit == len(res.history)
    assert [h["iteration"] for h in res.history] == list(range(1, res.nit + 1))
    assert all("norm" in h and np.isfinite(h["fun"]) for h in res.history)
    assert res.nfev >= res.nit


def test_stop_rule_ends_the_run_as_converged():
    q = Quadratic()
    res = minimize_lbfgs(q, np.zeros(5), tol=1e-12, stop=lambda w: abs(w[0] - 1) < 0.1)
    assert res.status == 0 and res.success and "stopping rule" in res.message
    assert abs(res.x[0] - 1) < 0.1


def test_iteration_limit_warns():
    with pytest.warns(ConvergenceWarning, match="iteration limit"):
        res = minimize_lbfgs(Quadratic(20), np.zeros(20), max_iter=2, tol=1e-12)
    assert res.status == 1 and not res.success


def test_monitor_time_is_left_out_of_the_solver_clock(monkeypatch):
    import dpipe.solvers._lbfgs as lbfgs

    class Clock:  # a deterministic clock: only the monitor advances it
        now = 0.0

        @staticmethod
        def perf_counter():
            return Clock.now

    monkeypatch.setattr(lbfgs, "time", Clock)

    def monitor(w):
        Clock.now += 5.0
        return {}

    res = minimize_lbfgs(Quadratic(), np.zeros(5), tol=1e-10, monitor=monitor)
    assert res.nit >= 3
    assert [h["seconds_monitor"] for h in res.history] == [5.0 * k for k in range(1, res.nit + 1)]
    assert all(h["seconds"] == 0.0 for h in res.history)  # the solver's own clock never moved
    assert res.time_solve == 5.0 * res.nit  # the wall time still counts the monitor


def test_whitened_first_step_is_minus_the_gradient():
    class Identity:
        """0.5 ||w - a||^2: its Hessian is the identity, so the step -g0 lands on the minimum."""

        def __init__(self) -> None:
            self.a, self.points = np.array([3e-3, -2e-3, 1e-3]), []

        def value_and_grad(self, w):
            self.points.append(w.copy())
            return 0.5 * float((w - self.a) @ (w - self.a)), w - self.a

    plain, whitened = Identity(), Identity()
    res_plain = minimize_lbfgs(plain, np.zeros(3), tol=1e-9)
    res = minimize_lbfgs(whitened, np.zeros(3), tol=1e-9, whitened=True)
    np.testing.assert_allclose(res.x, whitened.a, rtol=1e-9)
    # the start is evaluated once (not again by L-BFGS-B), the first trial is the minimum
    assert len(whitened.points) == res.nfev == 2
    np.testing.assert_allclose(whitened.points[1], whitened.a, rtol=1e-12)
    # without it the first trial has unit length, 200 times too long here, and backtracks
    assert np.linalg.norm(plain.points[1]) == pytest.approx(1.0) and res_plain.nfev > res.nfev
    # tol keeps its meaning: the largest gradient component, in the objective's own coordinates
    assert res.success and max(abs(res.x - whitened.a)) <= 1e-9


class _Quartic:
    """``-x + 250 x^4``: gradient -1 at 0, 999 at 1 (where L-BFGS-B's unit first trial lands), minimum at 0.1."""

    def value_and_grad(self, x):
        return float(-x.sum() + 250.0 * (x**4).sum()), -1.0 + 1000.0 * x**3


def test_the_relative_rule_is_not_measured_against_a_trial_point():
    """The first line search's overshooting trial (gradient 999) is not the run's reference: the rule once stopped after one iteration at
    ||g|| = 0.41, 41 % of the start's gradient, because it held ||g|| <= 0.03 x 999."""
    res = minimize_lbfgs(_Quartic(), np.zeros(1), memory=6, max_iter=100, tol=0.0, rtol=0.03)
    grads = [h["grad_norm"] for h in res.history]
    assert res.info["grad_norm0"] == 1.0 and res.info["grad_norm_max"] < 999.0
    assert grads[0] > 0.03 and res.nit > 1  # the first iterate does not meet the rule: the run goes on
    assert grads[-1] <= 0.03 * res.info["grad_norm_max"] and res.x[0] == pytest.approx(0.1, rel=0.05)
