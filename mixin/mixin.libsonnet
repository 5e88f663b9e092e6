// schedlat's monitoring mixin: recording rules, alerts and a Grafana
// dashboard for `schedlat serve`. Render with `jsonnet -J . -m rendered
// render.jsonnet` (what `cargo xtask mixin` runs), or import it into a
// kube-prometheus style build and override `_config` (config.libsonnet).
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
