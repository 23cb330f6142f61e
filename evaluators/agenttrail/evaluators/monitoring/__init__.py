"""Monitoring: metrics over time, drift detection, alerts and exports over stored runs."""
