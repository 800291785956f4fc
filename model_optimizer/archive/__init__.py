"""The archive stage: run folders under runs/ (the only writer there)."""

from model_optimizer.archive.run import (
                                         STATUS_INTERRUPTED,
                                         STATUS_OK,
                                         STATUS_RUNNING,
                                         RunArchive,
                                         failed_status,
                                         runs_dir,
                                         utc_now,
)

__all__ = ["STATUS_INTERRUPTED", "STATUS_OK", "STATUS_RUNNING", "RunArchive", "failed_status",
           "runs_dir", "utc_now"]
