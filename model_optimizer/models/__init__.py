"""Local model builders (no hub access needed)."""
