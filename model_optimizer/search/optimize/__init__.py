"""`mopt optimize`: from a model (or recipe) to a validated recipe in one command.

``candidates`` reads what to try, ``gate`` asks the quality stage, ``pipeline`` runs and
resumes the stages, ``report`` writes the before/after table, CSV, PNG and report.
"""
