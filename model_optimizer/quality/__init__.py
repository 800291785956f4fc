"""The quality stage: evaluate a deployment's answers and gate candidates on a baseline.

- :mod:`~model_optimizer.quality.evalset`: the JSONL eval-set format (prompts, references).
- :mod:`~model_optimizer.quality.client`: generation with recorded sampling, token ids,
  top-k logprobs; teacher-forced scoring.
- :mod:`~model_optimizer.quality.scoring`: task scorers and accuracy over repeats.
- :mod:`~model_optimizer.quality.fidelity`: exact match, first divergence, top-1 agreement,
  KL divergence from top-k logprobs.
- :mod:`~model_optimizer.quality.lmeval`: lm-evaluation-harness against the endpoint.
- :mod:`~model_optimizer.quality.compare`, :mod:`~model_optimizer.quality.gate`: the
  comparison with a baseline and the thresholds' verdict.
- :mod:`~model_optimizer.quality.evaluate`: one archived eval (launch or ``--url``).
- :mod:`~model_optimizer.quality.classgate`, :mod:`~model_optimizer.quality.precision`,
  :mod:`~model_optimizer.quality.fleet_route`: the gate per eval-set class, the precision
  routing rule, and ``mopt route`` (a fleet's routing table from measured quality).
- :mod:`~model_optimizer.quality.api`: :func:`evaluate` and :func:`gate` for other commands.
"""

from model_optimizer.quality.api import evaluate, gate, load_baseline, quality_of
from model_optimizer.quality.config import (
    OUTPUT_CHANGING,
    QualityConfig,
    Thresholds,
    changes_outputs,
    quality_config,
)
from model_optimizer.quality.gate import GateResult
from model_optimizer.quality.result import EvalResult

__all__ = ["OUTPUT_CHANGING", "EvalResult", "GateResult", "QualityConfig", "Thresholds",
           "changes_outputs", "evaluate", "gate", "load_baseline", "quality_config",
           "quality_of"]
