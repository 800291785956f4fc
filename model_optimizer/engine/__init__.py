"""The engine stage: start, watch, classify and stop a vLLM server. Knows nothing of sweeps."""

from model_optimizer.engine.classify import (
           Failure,
           classify_runtime_failure,
           classify_start_failure,
)
from model_optimizer.engine.supervisor import EngineProcess, EngineStartError, free_port

__all__ = ["EngineProcess", "EngineStartError", "Failure", "classify_runtime_failure",
           "classify_start_failure", "free_port"]
