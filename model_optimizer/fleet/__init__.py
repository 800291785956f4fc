"""Fleets: several vLLM instances on one accelerator behind one router (LiteLLM's proxy).

A fleet file (``kind: fleet``, ``schemas/fleet.v1.json``) names its instances (member
recipes or inline sections) with their shares of the accelerator, and the routing rules.
``load`` checks it like a recipe, ``plan`` sizes each instance and the shared accelerator,
``router`` writes the router's configuration (pure), ``run`` launches and measures it all,
``revision`` writes a revision whose routes come from a measured decision (``mopt route``).
docs/fleet.md is the user's page; docs/design.md section 2 says why LiteLLM's proxy.
"""

from model_optimizer.fleet.load import is_fleet_file, load_fleet, load_fleet_text
from model_optimizer.fleet.spec import Instance, LoadedFleet, Route, RouterSpec

__all__ = ["Instance", "LoadedFleet", "Route", "RouterSpec", "is_fleet_file", "load_fleet",
           "load_fleet_text"]
