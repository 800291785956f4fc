"""Run history: compare archived runs (``diff``), restore earlier states (``rollback``), and
notice when a validated recipe meets another vLLM or other hardware (``drift``).

Reads archives only through :mod:`model_optimizer.history.archives`, which verifies each
one against its manifest first; the only things written are new recipe revisions and the
rollback archives that record them.
"""
