"""dpipe's benchmark suites: ``python -m bench SUITE [--quick]`` (see bench/README.md)."""

__all__ = ["SUITES"]

#: suite name -> module under ``bench.suites``
SUITES = {
    "convergence": "convergence",
    "baselines": "baselines",
    "scaling": "scaling",
    "out-of-core": "out_of_core",
    "workers": "workers",
    "exchange": "exchange",
    "fairness": "fairness",
    "churn": "churn",
    "rate-goals": "rate_goals",
    "rate-scale": "rate_scale",
    "scale-race": "scale_race",
    "cost-model": "cost_model",
    "faults": "faults",
    "verify-cost": "verify_cost",
    "race": "race",
    "stopping": "stopping",
    "spark": "spark",
    "rate-speed": "rate_speed",
    "text": "text",
    "rate-generalization": "rate_generalization",
    "rate-defaults": "rate_defaults",
    "setup-floor": "setup_floor",
    "lam-auto": "lam_auto",
    "netns": "netns",
}
