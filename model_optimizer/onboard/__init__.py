"""Onboarding a new model: `mopt init` (a starting recipe from a model folder), the prompt
file reader it shares with `mopt quantize`, and what this machine has."""
