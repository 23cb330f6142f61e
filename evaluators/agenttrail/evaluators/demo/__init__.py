"""`agenttrail demo`: an example agent against a sidecar on a temporary store.

Owns the scripted example agent (`agent`, also the compose demo's traffic), the demo run
itself (`run`: references, scoring, a drift halfway, an alert, a report) and its monitoring
summary (`monitoring`). Only the CLI imports it.
"""
