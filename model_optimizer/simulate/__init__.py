"""The search simulator: the real sweep strategies against ground-truth curves with known
answers, under seeded noise, on a simulated clock (pure: no HTTP, no engine, no sleeping).

``truth`` (curves and the step-time model), ``bench`` (noise regimes, servers, clock),
``drive`` (one search by the real strategy code), ``fitted`` (the fitted-knee strategy),
``table`` (repetitions, figures, the markdown table). ``benchmarks/search_sim.py`` prints it.
"""
