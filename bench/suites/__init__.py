"""One module a suite, each with ``run(cfg) -> (payload, markdown)`` and its plots."""
