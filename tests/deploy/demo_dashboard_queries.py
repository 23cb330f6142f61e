"""Run as its own process (chDB holds one store directory per process): the demo fills an
embedded store, then every query of a Grafana dashboard runs on it as Grafana would send it.

    python demo_dashboard_queries.py STORE_DIR DASHBOARD_JSON FROM_S TO_S OUT_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from grafana_macros import render


def main(store_dir: str, dashboard_file: str, from_s: int, to_s: int, out_file: str) -> None:
    from agenttrail.collector.errors import StoreError
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.composition import build_sidecar
    from agenttrail.evaluators.demo.run import run_demo

    run_demo(runs=120, seed=7, keep=store_dir, build=build_sidecar, report=None, out=lambda _: None)
    store = Store(parse_store(store_dir, "agenttrail"))
    dashboard = json.loads(Path(dashboard_file).read_text())
    templating = {v["name"]: v for v in dashboard["templating"]["list"]}
    variables: dict[str, str | list[str]] = {"database": templating["database"]["query"]}
    agents = [
        row[0]
        for row in store.query(render(templating["agent"]["query"], variables, from_s=from_s, to_s=to_s))
    ]
    variables["agent"] = agents  # "All" selected: Grafana sends every value
    queries = {f"panel {p['id']} {p['title']}": p["targets"][0]["rawSql"] for p in dashboard["panels"]}
    queries |= {f"annotation {a['name']}": a["target"]["rawSql"] for a in dashboard["annotations"]["list"]}
    results: dict[str, object] = {"agents": agents}
    for name, sql in queries.items():
        try:
            rows = store.query(render(sql, variables, from_s=from_s, to_s=to_s))
            results[name] = {"rows": [[str(cell) for cell in row] for row in rows]}
        except StoreError as exc:
            results[name] = {"error": str(exc)}
    store.close()
    Path(out_file).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
