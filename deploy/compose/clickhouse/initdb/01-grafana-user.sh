#!/bin/bash
# Run once by the ClickHouse image on an empty data volume: a read-only user for Grafana.
set -euo pipefail
clickhouse client --user "${CLICKHOUSE_USER}" --password "${CLICKHOUSE_PASSWORD}" --multiquery <<SQL
CREATE USER IF NOT EXISTS grafana IDENTIFIED WITH sha256_password BY '${GRAFANA_CLICKHOUSE_PASSWORD}'
    SETTINGS readonly = 2;
GRANT SELECT ON agenttrail.* TO grafana;
SQL
