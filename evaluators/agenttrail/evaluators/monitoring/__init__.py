"""Monitoring: metrics over time, drift detection, alerts and exports over stored runs.

`service` (and `alerts.service`) is what `agenttrail stats`, `drift`, `report` (and `alerts`) do.
"""
