"""The search simulator: the real sweep strategies and the real tune against ground truths
with known answers, under seeded noise, on a simulated clock (pure: no HTTP, no engine, no
sleeping).

``truth`` (curves, the step-time model, the tune's surfaces), ``bench`` (noise regimes,
servers, clock), ``budget`` (the live sweep's time budget on that clock), ``drive`` (one
search by the real strategy code), ``fitted`` (the fitted-knee strategy), ``table``
(repetitions, figures, the markdown table); for the tune, ``tuning`` (the simulated engine
behind ``search/tune/scan.py``'s seams), ``tunedrive`` (one tune by the real tune code) and
``tunetable`` (its figures). ``benchmarks/search_sim.py`` prints the tables (``--tune`` the
tune's).
"""
