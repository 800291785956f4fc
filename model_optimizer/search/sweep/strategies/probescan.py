"""``probe-scan``: one server launched at the ceiling, the concurrency scanned on it
(``search/sweep/probe.py``), searched and re-measured as ``relaunch`` does; then one launch
confirms the choice. A ceiling that fails to start for memory is lowered once; any other
failure (or a second one) hands over to ``relaunch``."""

from __future__ import annotations

from model_optimizer.events import ProbeFailed
from model_optimizer.recipe.sweep_rules import RELAUNCH
from model_optimizer.search.core.scanrules import MAX_SCAN_SERVERS, lowered_ceiling
from model_optimizer.search.sweep.model import round_value
from model_optimizer.search.sweep.probe import ProbeServer
from model_optimizer.search.sweep.strategies import SweepStrategy
from model_optimizer.search.sweep.strategies.relaunch import Relaunch


@SweepStrategy.register("probe-scan")
class ProbeScan(Relaunch):
    """The levels on one live scan server, the choice confirmed by a launch of its own."""

    scans = True

    def scan(self) -> None:
        """The search on the live server (or on a test's measure): grow, re-measure."""
        self.grow()
        self.remeasure()

    def search(self) -> SweepStrategy:
        """Scan on one server at the ceiling; :class:`Relaunch` when none starts."""
        if self.steps.injected:  # a test's measure stands in for the scan server
            self.scan()
            return self
        state, steps = self.state, self.steps
        while not state.scan_finished:
            probe = ProbeServer(steps.loaded, steps.session.steps_dir, int(state.config.max),
                                state.objective, steps.session.archive.id, steps.emit,
                                steps.engine_factory, self.name)
            launching = steps.session.elapsed()
            with probe:
                state.server_launches += 1
                steps.session.save()
                if probe.started:  # its start is what the confirmation's launch will take
                    state.server_start_s = round(steps.session.elapsed() - launching, 3)
                    steps.probe = probe
                    self.scan()
                    state.scan_finished = True
                    steps.session.save()
            steps.probe = None
            if not probe.started and not self._lower_ceiling(probe):
                return self._relaunch_instead(probe)
        return self

    def _lower_ceiling(self, probe: ProbeServer) -> bool:
        """After the scan server failed to start: lower the ceiling for one more scan server
        when the failure was for memory (``lowered_ceiling``); False when it cannot."""
        failure = probe.outcome.failure if probe.outcome else None
        state = self.state
        config = state.config
        lowered = lowered_ceiling(failure.kind if failure else None, probe.ceiling,
                                  int(round_value(config, config.start))) \
            if state.server_launches < MAX_SCAN_SERVERS else None
        if lowered is None:
            return False
        state.ceiling_failed, config.max = probe.ceiling, lowered
        reason = (f"the scan server at max_num_seqs={probe.ceiling} failed to start "
                  f"({failure.kind}): the ceiling is lowered to {lowered}, and a choice at "
                  f"{lowered} is not resolved (the range above it is not seen)")
        self.steps.record_decision(None, None, reason, "memory")
        self.steps.emit(ProbeFailed(reason))
        self.steps.session.save()
        return True

    def _relaunch_instead(self, probe: ProbeServer) -> SweepStrategy:
        """The scan server did not start: one launch per value instead."""
        failure = probe.outcome.failure if probe.outcome else None
        self.state.strategy = RELAUNCH
        self.state.strategy_reason = (f"the probe-scan server at max_num_seqs="
                                      f"{probe.ceiling} failed to start "
                                      f"({failure.kind if failure else 'unknown'}), so "
                                      "every value is launched")
        self.steps.emit(ProbeFailed(self.state.strategy_reason))
        return SweepStrategy.resolve(RELAUNCH)(self.steps).search()
