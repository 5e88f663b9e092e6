// `jsonnet -J . -S -m rendered render.jsonnet`: the files Prometheus and
// Grafana load, written under rendered/ (checked in, and checked by
// tests/mixin.rs to be what this renders).
local mixin = import 'mixin.libsonnet';

// Expressions end in a newline so that YAML shows them as blocks, as
// written, not as one quoted line.
local blocks(file) = file {
  groups: [
    group { rules: [rule { expr: rule.expr + '\n' } for rule in group.rules] }
    for group in file.groups
  ],
};

{
  'rules.yaml': std.manifestYamlDoc(blocks(mixin.prometheusRules), indent_array_in_object=true, quote_keys=false),
  'alerts.yaml': std.manifestYamlDoc(blocks(mixin.prometheusAlerts), indent_array_in_object=true, quote_keys=false),
} + {
  [name]: std.manifestJsonEx(mixin.grafanaDashboards[name], '  ') + '\n'
  for name in std.objectFields(mixin.grafanaDashboards)
}
