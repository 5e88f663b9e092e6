// The dashboard: the host's wait distribution, the workloads that wait and
// those they wait behind, why they wait (the cause and decision splits),
// and what schedlat itself costs.
local lib = import '../lib.libsonnet';
local p = import 'panels.libsonnet';

{
  grafanaDashboards+:: {
    local config = $._config,
    local r = lib.rateName(config),
    local sel(extra=[]) = '{' + std.join(',', ['job=~"$job"', 'instance=~"$instance"'] + extra) + '}',
    local rate(metric, extra=[]) = std.format('rate(%s%s[$__rate_interval])', [metric, sel(extra)]),
    // One split's classes stacked as shares of wait time: `label` names the
    // class (cause, or the decision split's class).
    local splitPanel(metric, label, split, title, description) = p.timeseries(
      title,
      description,
      [p.target(std.format('sum by (%s) (%s)', [label, rate(metric, ['split="' + split + '"'])]), '{{' + label + '}}')],
      'percentunit',
      percent=true,
    ),

    'schedlat.json': {
      uid: config.dashboardUID,
      title: 'schedlat / run-queue latency',
      description: 'How long runnable tasks wait for a CPU, who waits, behind whom, why, and what measuring it costs (schedlat serve).',
      tags: config.dashboardTags,
      editable: true,
      schemaVersion: 39,
      time: { from: 'now-1h', to: 'now' },
      refresh: '30s',
      timezone: '',
      templating: {
        list: [
          { name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Data source' },
          {
            name: 'job',
            type: 'query',
            datasource: p.datasource,
            query: { query: 'label_values(schedlat_info, job)', refId: 'job' },
            definition: 'label_values(schedlat_info, job)',
            refresh: 2,
            includeAll: true,
            multi: true,
            current: { text: 'All', value: '$__all' },
          },
          {
            name: 'instance',
            type: 'query',
            datasource: p.datasource,
            query: { query: 'label_values(schedlat_info{job=~"$job"}, instance)', refId: 'instance' },
            definition: 'label_values(schedlat_info{job=~"$job"}, instance)',
            refresh: 2,
            includeAll: true,
            multi: true,
            current: { text: 'All', value: '$__all' },
          },
        ],
      },
      panels: p.layout([
        p.row('Host'),
        p.heatmap(
          'Wait distribution (native histogram)',
          'Waits per second by how long they took, every task on the selected hosts: from the native histogram (Prometheus with native histograms on). A long tail is an intermittent cause; a shifted band, structural contention.',
          p.target(std.format('sum(%s)', [rate('schedlat_runqueue_latency_seconds')]), '', format='heatmap'),
        ) { width:: 12 },
        p.heatmap(
          'Wait distribution (classic buckets)',
          'The same from the classic le buckets, for a Prometheus that stores those.',
          p.target(std.format('sum by (le) (%s)', [rate('schedlat_runqueue_latency_seconds_bucket')]), '{{le}}', format='heatmap'),
        ) { width:: 12 },
        p.timeseries(
          'Host percentiles',
          'p50, p90 and p99 of every wait on the host (recording rules instance:schedlat_runqueue_latency_seconds:p*).',
          [p.target(std.format('instance:schedlat_runqueue_latency_seconds:p%s_%s%s', [lib.percent(q), r, sel()]), '{{instance}} p' + lib.percent(q)) for q in config.quantiles],
          's',
        ) { width:: 8 },
        p.timeseries(
          'Waits per second per CPU',
          'Waits that ended on each CPU, per second (schedlat_cpu_runqueue_waits_total).',
          [p.target(std.format('sum by (instance, cpu) (%s)', [rate('schedlat_cpu_runqueue_waits_total')]), '{{instance}} cpu {{cpu}}')],
          'ops',
          stack=true,
        ) { width:: 8 },
        p.timeseries(
          'Time waited per CPU',
          'Seconds tasks spent queued on each CPU per second: 1 is one task always waiting. Comparable with node_schedstat_waiting_seconds_total.',
          [p.target(std.format('sum by (instance, cpu) (%s)', [rate('schedlat_cpu_runqueue_wait_seconds_total')]), '{{instance}} cpu {{cpu}}')],
          's',
          stack=true,
        ) { width:: 8 },

        p.row('Workloads'),
        p.timeseries(
          'p99 per workload (worst 10)',
          'The ten cgroups (containers, units) with the highest p99 wait (cgroup:schedlat_runqueue_latency_seconds:p99).',
          [p.target(std.format('topk(10, cgroup:schedlat_runqueue_latency_seconds:p99_%s%s)', [r, sel(['cgroup!="__overflow__"'])]), '{{instance}} {{cgroup}}')],
          's',
        ) { width:: 12 },
        p.timeseries(
          'p99 per pod (worst 10)',
          'The same rolled up per pod (namespace_pod:schedlat_runqueue_latency_seconds:p99).',
          [p.target(std.format('topk(10, namespace_pod:schedlat_runqueue_latency_seconds:p99_%s%s)', [r, sel()]), '{{namespace}}/{{pod}}')],
          's',
        ) { width:: 12 },
        p.table(
          'Top victims',
          'The workloads that spent the most time waiting for a CPU, in seconds per second.',
          [p.target(std.format('topk(10, cgroup:schedlat_runqueue_wait_seconds:%s%s)', [r, sel(['cgroup!="__overflow__"'])]), instant=true, format='table')],
          's',
        ) { width:: 8 },
        p.table(
          'Top culprits',
          'The workloads that held the CPU while others waited, in waited seconds per second (schedlat_neighbour_wait_seconds_total by holder).',
          [p.target(std.format('topk(10, sum by (instance, holder_cgroup, holder_namespace, holder_pod, holder_container) (%s))', [rate('schedlat_neighbour_wait_seconds_total', ['holder_cgroup!="__overflow__"'])]), instant=true, format='table')],
          's',
        ) { width:: 8 },
        p.table(
          'Who waits behind whom',
          'Of each victim\'s wait time, the share during which one named neighbour held the CPU (cgroup_holder:schedlat_neighbour_wait_seconds:ratio), the ten largest.',
          [p.target(std.format('topk(10, cgroup_holder:schedlat_neighbour_wait_seconds:ratio_%s%s)', [r, sel()]), instant=true, format='table')],
          'percentunit',
        ) { width:: 8 },

        p.row('Why they wait'),
      ] + [
        splitPanel('schedlat_runqueue_wait_by_cause_seconds_total', 'cause', s.split, s.title, s.description) { width:: 6 }
        for s in config.causeSplits
      ] + [
        splitPanel('schedlat_runqueue_wait_by_decision_seconds_total', 'class', s.split, s.title, s.description) { width:: 6 }
        for s in config.decisionSplits
      ] + [
        p.timeseries(
          'Overlaps: steal, IRQ, own throttling',
          'Of the waits that began and ended on one CPU, the share covered by steal, interrupt time and the waiter\'s own quota throttling (absent where the kernel lacks the accounting).',
          [p.target(std.format('sum by (overlap) (%s)\n/ ignoring (overlap) group_left\nsum(%s)', [rate('schedlat_runqueue_wait_overlap_seconds_total'), rate('schedlat_runqueue_wait_overlap_measured_seconds_total')]), '{{overlap}}')],
          'percentunit',
        ) { width:: 12 },

        p.row("schedlat's own cost"),
        p.timeseries(
          'BPF CPU time',
          "CPU seconds per second in schedlat's BPF programs, by tracepoint (needs kernel.bpf_stats_enabled=1; the ExporterCost alert compares it with its budget).",
          [p.target(std.format('sum by (instance, program) (%s)', [rate('schedlat_bpf_run_time_seconds_total')]), '{{instance}} {{program}}')],
          'percentunit',
          stack=true,
        ) { width:: 8 },
        p.timeseries(
          'BPF time per run',
          'Nanoseconds per run of each program: the cost per context switch or wakeup.',
          [p.target(std.format('sum by (instance, program) (%s)\n/\nsum by (instance, program) (%s)', [rate('schedlat_bpf_run_time_seconds_total'), rate('schedlat_bpf_runs_total')]), '{{instance}} {{program}}')],
          's',
        ) { width:: 8 },
        p.timeseries(
          'Scrape cost',
          "CPU time and wall time schedlat took to serve the previous scrape, and its body's size.",
          [
            p.target(std.format('schedlat_last_scrape_cpu_seconds%s', [sel()]), '{{instance}} CPU'),
            p.target(std.format('schedlat_last_scrape_duration_seconds%s', [sel()]), '{{instance}} wall'),
          ],
          's',
        ) { width:: 8 },
      ]),
    },
  },
}
