"""``relaunch``: one launch per value. The pure strategy (``search/sweep/strategy.py``) grows the
knob and bisects; the top candidates are then re-measured interleaved until the choice's
margin is shown or the budget is spent (``search/sweep/decide.py``). No step starts that the time
left cannot hold with the confirmation (``search/sweep/budget.py``)."""

from __future__ import annotations

from model_optimizer.search.sweep.budget import STOP_BUDGET
from model_optimizer.search.sweep.decide import PHASE_REMEASURE, remeasure_plan
from model_optimizer.search.sweep.strategies import SweepStrategy
from model_optimizer.search.sweep.strategy import next_value


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
        state = self.state
        if any(point.phase == PHASE_REMEASURE for point in state.history):
            return  # resumed after the search had finished
        while True:
            decision = next_value(state.config, state.history)
            if decision.value is None:
                self.steps.record_decision(None, decision.phase, decision.reason,
                                           decision.stop_rule or STOP_BUDGET)
                return
            if (spent := self.steps.budget_spent()) is not None:
                self.steps.record_decision(None, decision.phase, f"{spent.words()}; next "
                                           f"would have been: {decision.reason}", STOP_BUDGET)
                return
            self.steps.take(decision.value, decision.phase, decision.reason,
                            decision.stop_rule)

    def remeasure(self) -> None:
        """Measure the top candidates again, interleaved (A B A B), one pair at a time, until
        the choice's margin is shown or the budget is spent (``search/sweep/decide.py``)."""
        state, session = self.state, self.steps.session
        config = state.config
        if config.categorical:
            return
        while plan := remeasure_plan(config.plateau_threshold, state.history,
                                     self.steps.settings.remeasure_rounds):
            used = sum(point.launches for point in state.history)
            spent = self.steps.budget_spent()
            if (config.max_launches is not None and used >= config.max_launches) \
                    or spent is not None:
                why = spent.words() if spent else f"{session.elapsed() / 60:.1f} min used"
                self.steps.record_decision(None, PHASE_REMEASURE, f"re-measurement stopped "
                                           f"by the budget ({used} launches; {why})",
                                           STOP_BUDGET)
                return
            partner = next((v for v in plan if v != plan[0]), None)
            if partner is None:  # the last window of a round: its partner was measured last
                partner = next((p.value for p in reversed(state.history)
                                if p.phase == PHASE_REMEASURE and p.value != plan[0]), None)
            reason = (f"re-measure {plan[0]}"
                      f"{f' (interleaved with {partner})' if partner is not None else ''} "
                      "before choosing the knee: a slow minute hits both")
            self.steps.take(plan[0], PHASE_REMEASURE, reason)
