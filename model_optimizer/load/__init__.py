"""The load stage: prompts of exact token length, the streaming client, its statistics.

Knows HTTP and time, nothing of vLLM's internals (docs/design.md section 1). The mock server in
``model_optimizer.load.mock_server`` is imported on demand, not from here.
"""

from model_optimizer.load.client import (
    LoadResult,
    RequestRecord,
    build_payload,
    parse_request_rate,
    prompts_needed,
    run_load,
    run_load_sync,
)
from model_optimizer.load.prompts import PromptSource
from model_optimizer.load.stats import (
    is_good_request,
    percentile,
    request_tpot_s,
    slo_violations,
    summarize,
)

__all__ = [
    "LoadResult",
    "PromptSource",
    "RequestRecord",
    "build_payload",
    "is_good_request",
    "parse_request_rate",
    "percentile",
    "prompts_needed",
    "request_tpot_s",
    "run_load",
    "run_load_sync",
    "slo_violations",
    "summarize",
]
