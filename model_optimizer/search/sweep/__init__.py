"""The sweep stage: the pure strategy that picks the next value of one engine knob.

``next_value(config, history)`` is the ``next(history) -> config | None`` of the design: the
sweep loop measures each proposed value and stops at ``Decision(value=None)``; ``choose``
then picks the knee and ``fallback_candidates`` the values to try if the sustained
confirmation run rejects it.

Import them from :mod:`model_optimizer.search.sweep.strategy` (which re-exports the strategy's
vocabulary from :mod:`model_optimizer.search.sweep.model`); the package itself re-exports nothing,
so the names are listed once.
"""
