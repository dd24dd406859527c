"""Alerts before anyone asks: rules evaluated continuously on the live state of the clusters
this process watches, delivered to Slack and exported as Prometheus series.

* `config`  — the one configuration file (`DRA_MIRROR_ALERTS_CONFIG`), validated at start;
* `rules`   — the five rules, pure, over one cluster's index (`IndexView`): each gives the
  conditions that hold now, with since when;
* `engine`  — `AlertEngine`: evaluates the rules of every watched cluster on a timer and soon
  after each batch of changes, fires an alert once its condition has held long enough,
  resolves it when the condition ends, de-duplicated by identity;
* `slack`   — `SlackNotifier`: Block Kit messages through slack_sdk's Web API with a bot token,
  a channel per cluster or namespace, a resolved message in the alert's thread;
* `metrics` — `dra_mirror_alerts{rule,cluster,namespace,name,severity}`.

Alerts run in the watching process (beside the reactors) and read the reactors' own indexes,
so with leased watchers a cluster is alerted on only by the replica holding its lease.
"""
