"""``relaunch``: one launch per value. The pure strategy (``sweep/strategy.py``) grows the
knob and bisects; the top candidates are then re-measured interleaved until the choice's
margin is shown or the budget is spent (``sweep/decide.py``)."""

from __future__ import annotations

from model_optimizer.sweep.decide import PHASE_REMEASURE, remeasure_plan
from model_optimizer.sweep.strategies import SweepStrategy
from model_optimizer.sweep.strategy import next_value


@SweepStrategy.register("relaunch")
class Relaunch(SweepStrategy):
    """Grow, bisect, re-measure: each value a server of its own."""

    def search(self) -> SweepStrategy:
        """The growth search, then the re-measurement."""
        self.grow()
        self.remeasure()
        return self

    def grow(self) -> None:
        """Ask the pure strategy for values until it stops or the time budget is spent."""
        state, session = self.state, self.steps.session
        if any(point.phase == PHASE_REMEASURE for point in state.history):
            return  # resumed after the search had finished
        while True:
            decision = next_value(state.config, state.history)
            out_of_time = session.out_of_time(state.budget)
            if decision.value is None or out_of_time:
                reason = decision.reason if decision.value is None else (
                    f"time budget of {state.budget} min spent")
                self.steps.record_decision(None, decision.phase, reason, decision.stop_rule
                                           or "budget")
                return
            self.steps.take(decision.value, decision.phase, decision.reason,
                            decision.stop_rule)

    def remeasure(self) -> None:
        """Measure the top candidates again, interleaved (A B A B), one pair at a time, until
        the choice's margin is shown or the budget is spent (``sweep/decide.py``)."""
        state, session = self.state, self.steps.session
        config = state.config
        if config.categorical:
            return
        while plan := remeasure_plan(config.plateau_threshold, state.history,
                                     self.steps.settings.remeasure_rounds):
            used = sum(point.launches for point in state.history)
            if (config.max_launches is not None and used >= config.max_launches) \
                    or session.out_of_time(state.budget):
                self.steps.record_decision(None, PHASE_REMEASURE, f"re-measurement stopped "
                                           f"by the budget ({used} launches, "
                                           f"{session.elapsed() / 60:.1f} min used)", "budget")
                return
            partner = next((v for v in plan if v != plan[0]), None)
            if partner is None:  # the last window of a round: its partner was measured last
                partner = next((p.value for p in reversed(state.history)
                                if p.phase == PHASE_REMEASURE and p.value != plan[0]), None)
            reason = (f"re-measure {plan[0]}"
                      f"{f' (interleaved with {partner})' if partner is not None else ''} "
                      "before choosing the knee: a slow minute hits both")
            self.steps.take(plan[0], PHASE_REMEASURE, reason)
