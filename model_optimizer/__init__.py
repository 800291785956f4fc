"""mopt: recipe-driven, measured optimization of LLM deployments on vLLM."""

__version__ = "0.1.0"
