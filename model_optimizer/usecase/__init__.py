"""mopt's Python API: one entry function per command, typed arguments, typed results (each
with the command's ``exit_code``). The command line parses its flags into these calls and
prints what they return; docs/api.md shows them in use."""

from model_optimizer.usecase.apply import ApplyResult, apply, apply_fleet
from model_optimizer.usecase.bench import BenchRecipe, WorkloadFlags, bench, bench_recipe
from model_optimizer.usecase.capacity import capacity
from model_optimizer.usecase.eval import EvaluateResult, evaluate
from model_optimizer.usecase.export import ExportResult, export
from model_optimizer.usecase.fleet_sweep import FleetSweepOutcome, sweep_instances
from model_optimizer.usecase.init import InitResult, init
from model_optimizer.usecase.notices import Notice
from model_optimizer.usecase.optimize import optimize
from model_optimizer.usecase.quantize import quantize
from model_optimizer.usecase.report import ReportResult, report
from model_optimizer.usecase.rollback import RollbackOutcome, rollback
from model_optimizer.usecase.route import route
from model_optimizer.usecase.split import SplitOutcome, split
from model_optimizer.usecase.sweep import sweep
from model_optimizer.usecase.tune import tune
from model_optimizer.usecase.verify import needs_retune, retune, verify

__all__ = ["ApplyResult", "BenchRecipe", "EvaluateResult", "ExportResult", "FleetSweepOutcome",
           "InitResult", "Notice", "ReportResult", "RollbackOutcome", "SplitOutcome",
           "WorkloadFlags", "apply", "apply_fleet", "bench", "bench_recipe", "capacity",
           "evaluate", "export", "init", "needs_retune", "optimize", "quantize", "report",
           "retune", "rollback", "route", "split", "sweep", "sweep_instances", "tune", "verify"]
