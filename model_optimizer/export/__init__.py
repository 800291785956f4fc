"""The export stage: a validated recipe as a deployment (vLLM config, Compose, Kubernetes,
systemd), one module per format, all rendered from one ``Deployment``."""

from model_optimizer.export.deployment import Deployment, ExportError, build_deployment
from model_optimizer.export.run import FORMATS, ExportOptions, ExportOutcome, export_recipe

__all__ = ["FORMATS", "Deployment", "ExportError", "ExportOptions", "ExportOutcome",
           "build_deployment", "export_recipe"]
