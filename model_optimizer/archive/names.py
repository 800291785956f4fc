"""The names of the files and folders inside an archive: the one place they are spelled.

Every archive (a run, a bench, a sweep, a tune, a rollback) is a folder under ``runs/``;
what each file holds is described in ``archive/run.py`` (runs) and in the modules that write
the others (``search/sweep/outputs.py``, ``search/tune/outputs.py``, ``history/rollback.py``).
"""

# ----- every archive ---------------------------------------------------------------------
STATUS_FILE = "status.json"        # running | ok | failed:<class> | interrupted, details,
#                                    and the archive's own index row (archive/entry.py)
MANIFEST_FILE = "manifest.json"    # SHA-256 of every file, written last when sealed
REPORT_FILE = "report.md"          # a short human report
REPORT_HTML = "report.html"        # the self-contained HTML report (model_optimizer/report)
GIVEN_RECIPE = "recipe.given.yaml"  # the recipe file exactly as given

# ----- a run (or bench) --------------------------------------------------------------------
RUN_FILE = "run.json"              # id, times, argv, environment, versions, hardware
RESOLVED_RECIPE = "recipe.resolved.yaml"
ENGINE_LOG = "engine.log"
SERVER_FILE = "server.json"        # eval: the server's argv and environment (redacted)
REQUESTS_FILE = "requests.jsonl"
TELEMETRY_FILE = "telemetry.jsonl"
METRICS_FILE = "metrics.json"
FAILURE_FILE = "failure.json"

# ----- a capacity search (mopt capacity) ----------------------------------------------------
WINDOWS_FILE = "windows.jsonl"     # one judged window (offered rate, verdict, figures) per line

# ----- a search (sweep, tune) and a rollback -----------------------------------------------
STEPS_DIR = "steps"                # the run archives a search launched, nested
STATE_FILE = "state.json"          # what a search needs to resume
SUMMARY_FILE = "summary.json"
SUMMARY_CSV = "summary.csv"        # sweep: one row per step
TRIALS_CSV = "trials.csv"          # tune: one row per trial
SWEEP_PLOT = "plot.png"
STUDY_FILE = "study.db"            # tune: the optuna study (or a copy of a shared one)
HISTORY_PLOT = "history.png"
IMPORTANCES_PLOT = "importances.png"
PARETO_PLOT = "pareto.png"
PREVIOUS_RECIPE = "recipe.previous.yaml"  # the recipe before a revision was written
WRITTEN_RECIPE = "recipe.written.yaml"    # the revision written
REPLACED_RECIPE = "recipe.replaced.yaml"  # rollback: the file it replaced

# ----- a verification (mopt verify, rollback --apply) ---------------------------------------
VERDICT_FILE = "verdict.json"      # every figure judged against the validating run's

# ----- the runs directory ------------------------------------------------------------------
INDEX_NAME = "index.sqlite"
LOCK_NAME = ".lock"
