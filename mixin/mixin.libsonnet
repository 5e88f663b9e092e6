// schedlat's monitoring mixin: recording rules, alerts and a Grafana
// dashboard for `schedlat serve`. Render it with `jsonnet -J . -S -m
// rendered render.jsonnet` (tests/mixin.rs checks that rendered/ is what
// this gives), or import it into a kube-prometheus style build and override
// `_config` (config.libsonnet).
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
