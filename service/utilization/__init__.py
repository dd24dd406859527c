"""The utilisation source: Prometheus servers holding dcgm-exporter's series, per cluster.

* `config` — the one file (DRA_MIRROR_UTILIZATION_CONFIG) saying, per cluster, which server
  to ask, how to authenticate and which labels hold what; checked at start;
* `prometheus` — an async client of Prometheus' HTTP API (`/api/v1/query`,
  `/api/v1/query_range`), its failures translated once into `PrometheusError`;
* `source` — `PrometheusSource`, what the questions read: a cluster's dcgm readings over a
  window (`service.model.dcgm.Readings`), fetched with one range query per metric.

Without the file nothing here is built and nothing else changes.
"""
