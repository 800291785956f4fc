"""The ``kubernetes`` format: the server as a Deployment, and tune workers as an Indexed Job.

``kubernetes.yaml``: a ConfigMap holding the exported ``vllm.yaml``; a Deployment of the
official vLLM image (the config mounted, the model from a read-only PersistentVolumeClaim
``<name>-model``, ``/dev/shm`` in memory, the planned GPUs and host memory as resources,
start-up, readiness and liveness probes on ``/health``, the recipe's identity and pins as
annotations; ``${VAR}`` references of ``engine.env``, and the variables of options read
from the environment (``--api-key $(VLLM_API_KEY)``), from the Secret ``<name>-env``);
a Service; with ``hpa_max`` a HorizontalPodAutoscaler on vLLM's waiting-requests gauge.
The HPA reads that gauge from the custom metrics API, which needs a metrics adapter: the
export writes ``prometheus-adapter.yaml`` (the Prometheus adapter's rule, as Helm values),
the pods carry the ``prometheus.io/*`` scrape annotations, and the manifest names both.

``tune-job.yaml`` (with ``tune_workers``): an Indexed Job of N ``mopt tune`` workers on one
PostgreSQL study, the storage URL read from the Secret ``<name>-tune-db`` (key ``url``),
never written in the file; the recipe travels in a ConfigMap. Each worker keeps its runs
dir and its tuned recipe on the PersistentVolumeClaim ``<name>-tune-work`` (exported with
it, ReadWriteMany: the workers run at once), so the archives outlive the pods.

``verify-cronjob.yaml`` (unless ``--verify-schedule off``): a CronJob that runs ``mopt
verify --url http://<name>:<port>`` against the Service on the schedule
(``export/schedule.py``), one Job at a time (``concurrencyPolicy: Forbid``), in the tune
workers' image, the recipe from a ConfigMap, the variables it reads from the Secret
``<name>-env``; the archives and verdicts on the PersistentVolumeClaim
``<name>-verify-runs`` (exported with it) at ``/runs``. A regression exits 4, the Job
fails (no retry: a verdict is not a flake) and an alert on failed Jobs fires.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from model_optimizer.export.deployment import (
    CONTAINER_CONFIG,
    Deployment,
    client_variables,
    escape_dollars,
)
from model_optimizer.export.formats import ExportFormat, Rendering, register
from model_optimizer.export.schedule import TIME_ZONE, VERIFY_DEADLINE_S, Schedule, verify_args
from model_optimizer.export.vllm import config_text
from model_optimizer.recipe.security import one_line

MANIFEST_FILE = "kubernetes.yaml"
TUNE_JOB_FILE = "tune-job.yaml"
PROBE_PERIOD_S = 10
#: vLLM's /metrics gauge of queued requests, as the custom metrics API names it
QUEUE_METRIC = "vllm_num_requests_waiting"
#: the variable `mopt tune --storage` reads (cli/tune.py STORAGE_ENV)
TUNE_STORAGE_ENV = "MOPT_TUNE_STORAGE"
SHM_LIMIT = "8Gi"
ADAPTER_FILE = "prometheus-adapter.yaml"
#: the series vLLM's /metrics serves for the gauge (``QUEUE_METRIC`` in the metrics API)
QUEUE_SERIES = "vllm:num_requests_waiting"
#: room for every worker's archives and tuned recipe
TUNE_WORK_SIZE = "20Gi"
#: set by Kubernetes in each pod of an Indexed Job: the pod's index
JOB_INDEX = "$(JOB_COMPLETION_INDEX)"
VERIFY_CRONJOB_FILE = "verify-cronjob.yaml"
#: where the scheduled verifications keep their archives (on ``<name>-verify-runs``)
VERIFY_RUNS_DIR = "/runs"
VERIFY_RUNS_SIZE = "5Gi"
#: a verification is a load generator: no accelerator, a tokenizer and the requests' records
VERIFY_RESOURCES = {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}


def annotations(dep: Deployment) -> dict[str, str]:
    """The pins and recipe revision as annotations (``mopt/<key>``)."""
    return {"mopt/" + key.removeprefix("mopt."): value for key, value in dep.labels.items()}


def _secret(dep: Deployment, name: str, var: str) -> dict:
    """``name`` from the key ``var`` of the Secret ``<name>-env`` (required: a pod without
    it does not start)."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": f"{dep.name}-env",
                                                         "key": var}}}


def _env(dep: Deployment) -> list[dict]:
    """The server's environment: plain values, ``${VAR}`` references from the Secret, and
    the variables its options read (``$(VAR)`` in the arguments)."""
    env = [{"name": k, "value": escape_dollars(v)} for k, v in dep.env.items()]
    env += [_secret(dep, name, var) for name, var in dep.env_refs.items()]
    return env + [_secret(dep, var, var) for var in dict.fromkeys(dep.arg_refs.values())
                  if var not in dep.env_refs]


def _tune_env(dep: Deployment) -> list[dict]:
    """A tune worker's (or a verification's) environment: every variable its recipe reads
    (mopt expands the ``${VAR}`` references itself when it launches a server), and the API
    key its requests carry."""
    return [_secret(dep, var, var) for var in client_variables(dep)]


def _probe(dep: Deployment, failures: int) -> dict:
    return {"httpGet": {"path": "/health", "port": dep.port}, "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5, "failureThreshold": failures}


def _resources(dep: Deployment) -> dict:
    amounts = {"memory": f"{dep.memory_gib}Gi"}
    if not dep.on_cpu:
        amounts["nvidia.com/gpu"] = str(dep.accelerators)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _volumes(dep: Deployment) -> tuple[list[dict], list[dict]]:
    volumes = [{"name": "config", "configMap": {"name": f"{dep.name}-config"}},
               {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}}]
    mounts = [{"name": "config", "mountPath": str(Path(CONTAINER_CONFIG).parent),
               "readOnly": True}, {"name": "dshm", "mountPath": "/dev/shm"}]
    if dep.model_is_local:
        volumes.append({"name": "model", "persistentVolumeClaim": {
            "claimName": f"{dep.name}-model", "readOnly": True}})
        mounts.append({"name": "model", "mountPath": dep.container_model, "readOnly": True})
    return volumes, mounts


def deployment(dep: Deployment, replicas: int, startup_timeout_s: float) -> dict:
    """The Deployment of ``replicas`` servers."""
    volumes, mounts = _volumes(dep)
    container = {
        "name": "vllm", "image": dep.image, "command": ["python3", *dep.module_argv],
        "args": [*escape_dollars(dep.container_args()), *dep.env_args(lambda var: f"$({var})")],
        "ports": [{"name": "http", "containerPort": dep.port}],
        "env": _env(dep), "resources": _resources(dep), "volumeMounts": mounts,
        "startupProbe": _probe(dep, max(1, math.ceil(startup_timeout_s / PROBE_PERIOD_S))),
        "readinessProbe": _probe(dep, 3), "livenessProbe": _probe(dep, 6)}
    selector = {"app.kubernetes.io/name": dep.name}
    scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(dep.port),
              "prometheus.io/path": "/metrics"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": dep.name, "labels": selector, "annotations": annotations(dep)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": selector,
                                               "annotations": annotations(dep) | scrape},
                                  "spec": {"containers": [container], "volumes": volumes}}}}


def service(dep: Deployment) -> dict:
    """A ClusterIP Service in front of the Deployment."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": dep.name, "annotations": annotations(dep)},
            "spec": {"selector": {"app.kubernetes.io/name": dep.name},
                     "ports": [{"name": "http", "port": dep.port, "targetPort": "http"}]}}


def autoscaler(dep: Deployment, replicas: int, hpa_max: int, queue_target: int) -> dict:
    """An HPA that adds servers while requests wait in vLLM's queue."""
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": dep.name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": dep.name},
                     "minReplicas": replicas, "maxReplicas": max(hpa_max, replicas),
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": QUEUE_METRIC},
                         "target": {"type": "AverageValue",
                                    "averageValue": str(queue_target)}}}]}}


def adapter_values() -> dict:
    """Helm values of the Prometheus adapter (prometheus-community/prometheus-adapter) that
    serve vLLM's ``vllm:num_requests_waiting`` per pod as ``QUEUE_METRIC``."""
    return {"rules": {"custom": [{
        "seriesQuery": f'{QUEUE_SERIES}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"},
                                    "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{QUEUE_SERIES}$", "as": QUEUE_METRIC},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"}]}}


def config_map(name: str, key: str, text: str) -> dict:
    """A ConfigMap holding one file."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {key: text}}


def tune_job(dep: Deployment, workers: int, recipe_text: str, image: str) -> list[dict]:
    """The recipe's ConfigMap and an Indexed Job of ``workers`` tune workers."""
    args = ["tune", "/etc/mopt/recipe.yaml", "--study-name", dep.name]
    if dep.model_is_local:
        args += ["--set", f"model.path={dep.container_model}"]
    elif dep.config.get("revision"):  # the hub commit the export pinned (export/gates.py)
        args += ["--set", f"model.revision={dep.config['revision']}"]
    volumes, mounts = _volumes(dep)
    volumes[0] = {"name": "config", "configMap": {"name": f"{dep.name}-recipe"}}
    volumes.append({"name": "work", "persistentVolumeClaim": {
        "claimName": f"{dep.name}-tune-work"}})
    mounts.append({"name": "work", "mountPath": "/work"})
    container = {"name": "mopt-tune", "image": image, "command": ["mopt"],
                 "args": [*escape_dollars(args),  # then each worker's own folder on the claim
                          "--output", f"/work/recipe.tuned-{JOB_INDEX}.yaml",
                          "--runs-dir", f"/work/runs-{JOB_INDEX}"],
                 "env": [{"name": TUNE_STORAGE_ENV, "valueFrom": {"secretKeyRef": {
                     "name": f"{dep.name}-tune-db", "key": "url"}}}, *_tune_env(dep)],
                 "resources": _resources(dep), "volumeMounts": mounts}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{dep.name}-tune", "annotations": annotations(dep)},
           "spec": {"completionMode": "Indexed", "completions": workers,
                    "parallelism": workers, "backoffLimit": workers,
                    "template": {"spec": {"restartPolicy": "Never",
                                          "containers": [container], "volumes": volumes}}}}
    claim = _claim(f"{dep.name}-tune-work", "ReadWriteMany", TUNE_WORK_SIZE)
    return [config_map(f"{dep.name}-recipe", "recipe.yaml", recipe_text), claim, job]


def _claim(name: str, access: str, size: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": [access], "resources": {"requests": {"storage": size}}}}


def verify_cronjob(dep: Deployment, schedule: Schedule, recipe_text: str, image: str
                   ) -> list[dict]:
    """The recipe's ConfigMap, the runs claim and the CronJob of ``mopt verify --url``."""
    volumes = [{"name": "recipe", "configMap": {"name": f"{dep.name}-verify-recipe"}},
               {"name": "runs", "persistentVolumeClaim": {
                   "claimName": f"{dep.name}-verify-runs"}}]
    mounts = [{"name": "recipe", "mountPath": str(Path(CONTAINER_CONFIG).parent),
               "readOnly": True}, {"name": "runs", "mountPath": VERIFY_RUNS_DIR}]
    tokenizer = None
    if dep.model_is_local:  # prompt lengths counted in the served model's tokenizer
        volumes.append({"name": "model", "persistentVolumeClaim": {
            "claimName": f"{dep.name}-model", "readOnly": True}})
        mounts.append({"name": "model", "mountPath": dep.container_model, "readOnly": True})
        tokenizer = dep.container_model
    args = verify_args("/etc/mopt/recipe.yaml", f"http://{dep.name}:{dep.port}",
                       VERIFY_RUNS_DIR, tokenizer)
    container = {"name": "mopt-verify", "image": image, "command": ["mopt"],
                 "args": escape_dollars(args), "env": _tune_env(dep),
                 "resources": VERIFY_RESOURCES, "volumeMounts": mounts}
    job = {"backoffLimit": 0, "activeDeadlineSeconds": VERIFY_DEADLINE_S,
           "template": {"metadata": {"annotations": annotations(dep)},
                        "spec": {"restartPolicy": "Never", "containers": [container],
                                 "volumes": volumes}}}
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": {"name": f"{dep.name}-verify", "annotations": annotations(dep)},
               "spec": {"schedule": schedule.cron, "timeZone": TIME_ZONE,
                        "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
                        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
                        "jobTemplate": {"spec": job}}}
    return [config_map(f"{dep.name}-verify-recipe", "recipe.yaml", recipe_text),
            _claim(f"{dep.name}-verify-runs", "ReadWriteOnce", VERIFY_RUNS_SIZE), cronjob]


def dump(documents: list[dict], header: str) -> str:
    """Documents as one multi-document YAML file."""
    return header + yaml.safe_dump_all(documents, sort_keys=False)


def render(dep: Deployment, config_text: str, *, replicas: int, startup_timeout_s: float,
           hpa_max: int | None, queue_target: int) -> dict[str, str]:
    """``kubernetes.yaml``: ConfigMap, Deployment, Service (and HPA)."""
    documents = [config_map(f"{dep.name}-config", Path(CONTAINER_CONFIG).name, config_text),
                 deployment(dep, replicas, startup_timeout_s), service(dep)]
    header = (f"# Kubernetes manifests generated by mopt export: recipe "
              f"{one_line(dep.labels['mopt.recipe'])} revision {dep.revision}.\n"
              f"# Apply: kubectl apply -f {MANIFEST_FILE}\n")
    if not hpa_max:
        return {MANIFEST_FILE: dump(documents, header)}
    documents.append(autoscaler(dep, replicas, hpa_max, queue_target))
    header += (f"# The HorizontalPodAutoscaler reads {QUEUE_METRIC} from the custom metrics "
               "API: it needs the Prometheus adapter with the rule in\n"
               f"# {ADAPTER_FILE} (helm install prometheus-adapter "
               f"prometheus-community/prometheus-adapter -f {ADAPTER_FILE})\n"
               "# and a Prometheus that scrapes the pods (their prometheus.io/* "
               "annotations). See docs/deploy.md.\n")
    adapter = (f"# Prometheus adapter rule for the HPA of {dep.name} (mopt export): serves "
               f"vLLM's {QUEUE_SERIES} per pod as {QUEUE_METRIC}.\n")
    return {MANIFEST_FILE: dump(documents, header),
            ADAPTER_FILE: adapter + yaml.safe_dump(adapter_values(), sort_keys=False)}


def render_tune_job(dep: Deployment, workers: int, recipe_text: str, image: str
                    ) -> dict[str, str]:
    """``tune-job.yaml``: the recipe's ConfigMap and the Indexed Job."""
    header = (f"# {workers} mopt tune workers on one PostgreSQL study, generated by mopt "
              f"export.\n# First: kubectl create secret generic {dep.name}-tune-db "
              f"--from-literal=url=\"$DATABASE_URL\"\n")
    return {TUNE_JOB_FILE: dump(tune_job(dep, workers, recipe_text, image), header)}


def render_verify_cronjob(dep: Deployment, schedule: Schedule, recipe_text: str, image: str
                          ) -> dict[str, str]:
    """``verify-cronjob.yaml``: the scheduled ``mopt verify --url`` of the deployment."""
    header = (f"# mopt verify of {dep.name} on the schedule \"{schedule.cron}\" (UTC), "
              "generated by mopt export.\n"
              f"# Archives and verdicts stay on the claim {dep.name}-verify-runs "
              f"({VERIFY_RUNS_DIR}).\n"
              "# A regression exits 4 and fails the Job: alert on failed Jobs "
              "(kube_job_status_failed).\n"
              "# Copy the validating archive onto the claim to compare with intervals "
              "(docs/production.md).\n")
    return {VERIFY_CRONJOB_FILE: dump(verify_cronjob(dep, schedule, recipe_text, image),
                                      header)}


@register
class KubernetesFormat(ExportFormat):
    """``kubernetes``: the manifests, with the tune workers' Job and the scheduled
    verification when asked."""

    name, order = "kubernetes", 2

    def render(self, given: Rendering) -> dict[str, str]:
        """The manifests (the vLLM config in a ConfigMap)."""
        dep, options = given.dep, given.options
        files = render(dep, config_text(dep), replicas=options.replicas,
                       startup_timeout_s=given.startup_timeout_s, hpa_max=options.hpa_max,
                       queue_target=options.queue_target)
        if options.tune_workers:
            files |= render_tune_job(dep, options.tune_workers, given.loaded.source_text,
                                     options.tune_image)
        if given.schedule:
            files |= render_verify_cronjob(dep, given.schedule, given.loaded.source_text,
                                           options.tune_image)
        return files
