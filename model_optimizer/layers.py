"""The layers of mopt, lowest first: the one definition of which package may import which.

A module may import modules of its own package and of any package in a LOWER layer; never a
package of a higher layer, nor another package of its own layer (siblings stay
independent). ``tests/unit/test_layers.py`` parses every import (function-level ones too)
and fails on a violation; ``docs/design.md`` section 5 explains the order.

Names are the first component under ``model_optimizer`` (a package or a top-level module);
``""`` is ``model_optimizer/__init__.py`` itself. A new top-level package or module must be
placed here, or the layer test fails.

A family is a package whose children (its subpackages and modules) have layers of their own,
``FAMILIES``: the same rule one level down, so that inside ``search`` the strategies stand on
the core and never on each other. Outside the family, the family is one name in ``LAYERS``.
"""

LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: error types, atomic files, bounded HTTP calls, secrets, signal handling,
    # request-class mixes and length distributions, progress events, text safe to show;
    # no mopt imports
    ("", "errors", "events", "fsutil", "httpcall", "layers", "secrets", "signals", "mix",
     "shown"),
    # stages that know nothing of recipes: planner arithmetic and accelerator facts, the
    # load generator, telemetry probes, the tiny model builder and checkpoint pins
    ("plan", "load", "telemetry", "models"),
    # the recipe: load, validate (rules read the accelerator facts of plan), render, write
    ("recipe",),
    # the server process: supervisor, failure classes, and the factory that renders a
    # recipe into a vLLM (or mock) command
    ("engine",),
    # run folders, manifests, the index (each archive kind writes its own index row)
    ("archive",),
    # tools on recipes and archives, independent of each other: checks before a launch
    # (preflight), cleaning up after a killed mopt (reaper), a first recipe (onboard); the
    # client's figures against the server's own (crosscheck)
    ("preflight", "reaper", "onboard", "crosscheck"),
    # making a quantized checkpoint (llm-compressor in its own venv), its pins
    ("quantize",),
    # one measured window on a live server: the load, telemetry, vLLM's histograms, checks
    ("window",),
    # one measured, archived run of one recipe
    ("runner",),
    # a fleet: several instances and their router, planned, launched and measured through
    # the router's one URL
    ("fleet",),
    # runs, diff, rollback, drift: reading archives; a recipe or a fleet as a deployment:
    # vLLM config, Compose, Kubernetes, systemd (export: above fleet, whose router
    # configuration a fleet's export writes)
    ("history", "export"),
    # the HTML report of an archive (read from its files; sweeps, tunes and optimizes write
    # it when they end); re-measuring a validated revision and judging it by the history's
    # rule (mopt verify, rollback --apply)
    ("report", "verify"),
    # output quality: lm-eval and fidelity checks against a baseline (serves the model)
    ("quality",),
    # the search family: every search for a configuration by measurement, its own layers in
    # FAMILIES["search"] (above quality: the core gates candidates on it)
    ("search",),
    # one entry function per command, typed arguments and typed results: what the command
    # line parses into and prints from, and mopt's Python API (docs/api.md)
    ("usecase",),
    # the command line
    ("cli",),
    ("__main__",),
)


def layer_of(name: str) -> int | None:
    """The layer number (0 lowest) of the top-level package or module ``name``."""
    for number, names in enumerate(LAYERS):
        if name in names:
            return number
    return None


#: family -> its children's layers, lowest first; ``""`` is the family's ``__init__.py``. A
#: child imports children of lower layers only, never a sibling of its layer; a new child
#: must be placed here, or the layer test fails.
FAMILIES: dict[str, tuple[tuple[str, ...], ...]] = {
    "search": (
        # one configuration for a search: planner check, repeats, figures (measure); the
        # rate search of mopt capacity: windows at offered rates on one live server
        ("", "measure", "capacity"),
        # the core the strategies stand on: a search run's archive, state, clock, budget,
        # sealing (session); knob helpers; the validated revision; the live scan server
        ("core",),
        # the strategies: one knob (sweep), several with optuna (tune)
        ("sweep", "tune"),
        # pipelines of strategies: quantize candidates, then a sweep on the survivor
        # (optimize); the search simulator: the real strategies against known curves, no
        # engine (simulate)
        ("optimize", "simulate"),
    ),
}


def child_layer_of(family: str, name: str) -> int | None:
    """The layer number (0 lowest) of child ``name`` inside family ``family``."""
    for number, names in enumerate(FAMILIES.get(family, ())):
        if name in names:
            return number
    return None
