// The alerts. Each names what it judged in its labels (the workload, and
// for NoisyNeighbour the neighbour too) and links its runbook
// (mixin/runbooks.md), which says what to check and what to change.
local lib = import '../lib.libsonnet';

{
  prometheusAlerts+:: {
    local config = $._config,
    local r = lib.rateName(config),
    local rule(name) = std.format('%s:%s', [name, r]),
    local runbook(alert) = config.runbookURL + '#' + std.asciiLower(alert),
    local filter = '{' + config.workloadFilter + '}',
    local onCgroup = ' and on (job, instance, cgroup)\n',

    // The workload condition both latency alerts share: its p99 is above
    // the threshold while it waits often enough for a p99 to mean something.
    local slowWorkload =
      std.format('cgroup:schedlat_runqueue_latency_seconds:p99_%s%s > %g', [r, filter, config.latencyHighSeconds])
      + onCgroup
      + std.format('cgroup:schedlat_runqueue_waits:%s >= %g', [r, config.minWaitsPerSecond]),

    // The neighbour's share of each victim's wait time, and the same
    // series with the victim's pod written into the holder's labels, for
    // victims in a pod: a series with a twin of the same labels is one
    // whose holder is in the victim's own pod (a sidecar, another of its
    // containers), which is no neighbour. PromQL cannot compare two labels
    // of one series; matching a series against its relabelled self can.
    // Both roles of a neighbour (docs/containers.md): it held the CPU
    // during the victim's waits (role="held_cpu"), or it had used the
    // share of a group the victim is in just before waits that lost there
    // (role="used_share", with that `group`).
    local roles = [
      ['held_cpu', std.format('cgroup_holder:schedlat_neighbour_wait_seconds:ratio_%s', [r])],
      ['used_share', std.format('cgroup_holder:schedlat_neighbour_share_seconds:ratio_%s', [r])],
    ],
    local roleShare(role, selector) = std.format('label_replace(%s, "role", "%s", "", "")', [selector, role]),
    local neighbourShare = '(\n  '
      + std.join('\nor\n  ', [roleShare(x[0], x[1] + '{holder_cgroup!="__overflow__"}') for x in roles])
      + '\n)',
    // The same with the victim's cgroup written as the holder's: a twin
    // there is a series whose holder is the victim itself (its own
    // real-time thread, say, which held_by counts as a higher class).
    local ownTwins = '(\n  '
      + std.join('\nor\n  ', [
        std.format('label_replace(label_replace(%s{holder_cgroup!="__overflow__",pod!=""}, "holder_pod", "$1", "pod", "(.+)"), "holder_namespace", "$1", "namespace", "(.*)")', [x[1]])
        for x in roles
      ] + [
        std.format('label_replace(%s{holder_cgroup!="__overflow__"}, "holder_cgroup", "$1", "cgroup", "(.*)")', [x[1]])
        for x in roles
      ])
      + '\n)\n',

    groups+: [
      {
        name: 'schedlat',
        rules: [
          {
            alert: 'RunqueueLatencyHigh',
            expr: slowWorkload,
            'for': config.latencyHighFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Tasks of {{ $labels.cgroup }} wait long for a CPU.',
              description: 'On {{ $labels.instance }}, the p99 run-queue wait of {{ $labels.cgroup }}{{ if $labels.pod }} (pod {{ $labels.namespace }}/{{ $labels.pod }}, container {{ $labels.container }}){{ end }} is {{ $value | humanizeDuration }}, above '
                           + std.format('%g', config.latencyHighSeconds * 1000) + ' ms for ' + config.latencyHighFor + '.',
              runbook_url: runbook('RunqueueLatencyHigh'),
            },
          },
          {
            // The value is the neighbour's share of the victim's wait time.
            alert: 'NoisyNeighbour',
            expr:
              std.format('%s >= %g', [neighbourShare, config.neighbourShare])
              + '\nunless on (job, instance, cgroup, holder_cgroup, holder_namespace, holder_pod)\n'
              + ownTwins
              + onCgroup
              + std.format('cgroup:schedlat_runqueue_wait_held_by_others:ratio_%s >= %g', [r, config.heldByOthersShare])
              + onCgroup + '(\n' + slowWorkload + '\n)\n'
              + 'unless on (job, instance, cgroup)\n'
              + std.format('cgroup:schedlat_runqueue_wait_throttled:ratio_%s >= %g', [r, config.ownThrottledShareMax]),
            'for': config.neighbourFor,
            labels: { severity: 'warning' },
            annotations: {
              // The workloads as their owners know them: namespace/pod,
              // not a cgroup path of 200 characters; the path where there
              // is no pod, and the root cgroup said in words.
              summary: '{{ if $labels.pod }}Pod {{ $labels.namespace }}/{{ $labels.pod }}{{ else }}{{ $labels.cgroup }}{{ end }} waits behind '
                       + '{{ if $labels.holder_pod }}pod {{ $labels.holder_namespace }}/{{ $labels.holder_pod }}{{ else if eq $labels.holder_cgroup "/" }}the root cgroup (tasks in no group, kernel threads){{ else }}{{ $labels.holder_cgroup }}{{ end }}.',
              description: 'On {{ $labels.instance }}, {{ $labels.holder_cgroup }}{{ if $labels.holder_pod }} (pod {{ $labels.holder_namespace }}/{{ $labels.holder_pod }}){{ end }} {{ if eq $labels.role "used_share" }}had used the share of {{ $labels.group }}, a group it shares with {{ $labels.cgroup }}, just before waits whose wakeups lost there: {{ $value | humanizePercentage }}{{ else }}held the CPU for {{ $value | humanizePercentage }}{{ end }} of the run-queue wait time of {{ $labels.cgroup }}{{ if $labels.pod }} (pod {{ $labels.namespace }}/{{ $labels.pod }}){{ end }}; its p99 wait is above '
                           + std.format('%g', config.latencyHighSeconds * 1000) + ' ms and its own quota throttling covers under '
                           + std.format('%g', config.ownThrottledShareMax * 100) + '% of its waits.',
              runbook_url: runbook('NoisyNeighbour'),
            },
          },
          {
            alert: 'QuotaThrottlingWaits',
            expr:
              std.format('cgroup:schedlat_runqueue_wait_throttled:ratio_%s%s >= %g', [r, filter, config.throttledShare])
              + onCgroup
              + std.format('cgroup:schedlat_runqueue_wait_seconds:%s >= %g', [r, config.throttledMinWaitRate]),
            'for': config.throttledFor,
            labels: { severity: 'info' },
            annotations: {
              summary: '{{ $labels.cgroup }} waits on its own CPU quota.',
              description: 'On {{ $labels.instance }}, the cpu.max throttling of {{ $labels.cgroup }} itself covers {{ $value | humanizePercentage }} of its measured run-queue waits: the wait is self-inflicted, not a neighbour.',
              runbook_url: runbook('QuotaThrottlingWaits'),
            },
          },
          {
            alert: 'StealHigh',
            expr:
              std.format('instance:schedlat_runqueue_wait_steal:ratio_%s >= %g', [r, config.stealShare])
              + ' and on (job, instance)\n'
              + std.format('instance:schedlat_runqueue_wait_seconds:%s >= %g', [r, config.stealMinWaitRate]),
            'for': config.stealFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The hypervisor takes the CPU from {{ $labels.instance }} while its tasks wait.',
              description: 'Steal time covers {{ $value | humanizePercentage }} of the run-queue waits measured on {{ $labels.instance }}: another virtual machine ran on its physical CPUs.',
              runbook_url: runbook('StealHigh'),
            },
          },
          {
            alert: 'ExporterCost',
            expr: std.format('instance:schedlat_bpf_run_time_seconds:%s > %g', [r, config.exporterBpfCpuBudget]),
            'for': config.exporterCostFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: "schedlat's own BPF programs cost more than their budget on {{ $labels.instance }}.",
              description: "schedlat's BPF programs use {{ $value | humanizePercentage }} of a CPU on {{ $labels.instance }}, over the budget of "
                           + std.format('%g', config.exporterBpfCpuBudget * 100) + '%.',
              runbook_url: runbook('ExporterCost'),
            },
          },
        ],
      },
    ],
  },
}
