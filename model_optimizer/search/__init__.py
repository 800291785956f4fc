"""The search family: everything that searches for a configuration by measuring it.

One package, its children in their own order (``model_optimizer/layers.py``, ``FAMILY``;
``docs/design.md`` section 5): ``measure`` (one configuration for a search) and ``capacity``
(the rate search of ``mopt capacity``); ``core`` (what the strategies stand on: the search
session, knobs, the revision, the live scan); ``sweep`` and ``tune`` (the strategies);
``optimize`` (a pipeline of strategies) and ``simulate`` (the strategies against known
curves, no engine).

This module imports nothing, so importing one child does not pull in the others.
"""
