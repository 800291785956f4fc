"""The rules an exported ``compose.yaml`` must follow, as a JSON Schema (Draft 2020-12).

Written here from the Compose specification's rules for the keys mopt writes (not a copy
of the compose-spec schema): known keys only, each of its type; durations, sizes and port
mappings in Compose's syntax; bind mounts with absolute container paths; and the
interpolation rule: Compose reads ``$`` in every value, so a value holds only literal
``$$``, or a ``${VAR}`` / ``${VAR:?message}`` interpolation.
"""

from __future__ import annotations

#: a string Compose interpolates to what mopt meant: ``$$`` or ``${NAME[:?message]}`` only
INTERPOLATED = r"^([^$]|\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*(:\?[^}]*)?\})*$"
DURATION = r"^[0-9]+(us|ms|s|m|h)$"

STRING = {"type": "string", "pattern": INTERPOLATED}
STRINGS = {"type": "array", "items": STRING, "minItems": 1}

SERVICE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["image", "command", "volumes", "healthcheck"],
    "properties": {
        "image": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?$"},
        "entrypoint": STRINGS,
        "command": STRINGS,
        "env_file": STRINGS,
        "environment": {"type": "object", "additionalProperties": STRING,
                        "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"}},
        "ports": {"type": "array", "items": {
            "type": "string",
            "pattern": r"^(\[[0-9a-fA-F:]+\]|[0-9.]+|[A-Za-z0-9.-]+):[0-9]{1,5}:[0-9]{1,5}$"}},
        "volumes": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["type", "source", "target"],
            "properties": {"type": {"const": "bind"}, "source": STRING,
                           "target": {"type": "string", "pattern": r"^/"},
                           "read_only": {"type": "boolean"}}}},
        "shm_size": {"type": "string", "pattern": r"^[0-9]+[bkmg]b?$"},
        "deploy": {"type": "object", "additionalProperties": False, "properties": {
            "resources": {"type": "object", "additionalProperties": False, "properties": {
                "limits": {"type": "object", "additionalProperties": False, "properties": {
                    "memory": {"type": "string", "pattern": r"^[0-9]+[bkmg]b?$"}}},
                "reservations": {"type": "object", "additionalProperties": False,
                                 "properties": {"devices": {"type": "array", "items": {
                                     "type": "object", "additionalProperties": False,
                                     "required": ["capabilities"],
                                     # Compose takes a count or the cards' ids, not both
                                     "not": {"required": ["count", "device_ids"]},
                                     "properties": {
                                         "driver": {"type": "string"},
                                         "count": {"type": "integer", "minimum": 1},
                                         "device_ids": {"type": "array", "minItems": 1,
                                                        "items": {"type": "string"}},
                                         "capabilities": {"type": "array",
                                                          "items": {"type": "string"}}}}}}}}}}},
        "healthcheck": {"type": "object", "additionalProperties": False,
                        "required": ["test"], "properties": {
                            "test": {"type": "array", "prefixItems": [{"const": "CMD"}],
                                     "items": STRING, "minItems": 2},
                            "interval": {"type": "string", "pattern": DURATION},
                            "timeout": {"type": "string", "pattern": DURATION},
                            "start_period": {"type": "string", "pattern": DURATION},
                            "retries": {"type": "integer", "minimum": 0}}},
        "depends_on": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False, "required": ["condition"],
            "properties": {"condition": {"enum": ["service_started", "service_healthy",
                                                  "service_completed_successfully"]}}}},
        "restart": {"enum": ["no", "always", "on-failure", "unless-stopped"]},
        "labels": {"type": "object", "additionalProperties": STRING},
    },
}

COMPOSE_RULES = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["services"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9_-]*$"},
        "services": {"type": "object", "minProperties": 1,
                     "propertyNames": {"pattern": r"^[a-zA-Z0-9._-]+$"},
                     "additionalProperties": SERVICE},
    },
}
