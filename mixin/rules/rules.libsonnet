// Recording rules: the percentiles per workload level and per host, the
// wait rates per CPU, and the shares the alerts compare with thresholds.
// Names follow level:metric:operation.
local lib = import '../lib.libsonnet';

{
  prometheusRules+:: {
    local config = $._config,
    local r = lib.rateName(config),
    local cgroupLabels = ['cgroup', 'namespace', 'pod', 'container', 'unit'],
    local family = 'schedlat_cgroup_runqueue_latency_seconds',

    // Per workload level: p50/p90/p99, waits per second and seconds waited
    // per second, from the per-cgroup family.
    local level(l) = [
      {
        record: std.format('%s:schedlat_runqueue_latency_seconds:p%s_%s', [l.name, lib.percent(q), r]),
        expr: lib.quantile(config, q, family, l.labels, [l.present + '!=""']),
      }
      for q in config.quantiles
    ] + [
      {
        record: std.format('%s:schedlat_runqueue_waits:%s', [l.name, r]),
        expr: lib.histogramRate(config, 'count', family, l.labels, [l.present + '!=""']),
      },
      {
        record: std.format('%s:schedlat_runqueue_wait_seconds:%s', [l.name, r]),
        expr: lib.histogramRate(config, 'sum', family, l.labels, [l.present + '!=""']),
      },
    ],

    groups+: [
      {
        name: 'schedlat-workloads',
        rules: std.flattenArrays([level(l) for l in config.levels]),
      },
      {
        name: 'schedlat-host',
        rules: [
          {
            record: std.format('instance:schedlat_runqueue_latency_seconds:p%s_%s', [lib.percent(q), r]),
            expr: lib.quantile(config, q, 'schedlat_runqueue_latency_seconds', []),
          }
          for q in config.quantiles
        ] + [
          {
            record: 'instance:schedlat_runqueue_waits:' + r,
            expr: lib.histogramRate(config, 'count', 'schedlat_runqueue_latency_seconds', []),
          },
          {
            record: 'instance:schedlat_runqueue_wait_seconds:' + r,
            expr: lib.histogramRate(config, 'sum', 'schedlat_runqueue_latency_seconds', []),
          },
          // Per CPU the wait ended on: comparable with node_exporter's
          // node_schedstat_waiting_seconds_total{cpu}.
          {
            record: 'instance_cpu:schedlat_runqueue_waits:' + r,
            expr: lib.sumRate(config, 'schedlat_cpu_runqueue_waits_total', ['cpu']),
          },
          {
            record: 'instance_cpu:schedlat_runqueue_wait_seconds:' + r,
            expr: lib.sumRate(config, 'schedlat_cpu_runqueue_wait_seconds_total', ['cpu']),
          },
          // The hypervisor's share of the waits that began and ended on one
          // CPU (the only ones whose overlap is measured).
          {
            record: 'instance:schedlat_runqueue_wait_steal:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_runqueue_wait_overlap_seconds_total', [], ['overlap="steal"'])
                  + '\n/\n'
                  + lib.sumRate(config, 'schedlat_runqueue_wait_overlap_measured_seconds_total', []),
          },
          {
            record: 'instance:schedlat_bpf_run_time_seconds:' + r,
            expr: lib.sumRate(config, 'schedlat_bpf_run_time_seconds_total', []),
          },
        ],
      },
      {
        name: 'schedlat-causes',
        rules: [
          // Of a cgroup's wait time, the share that ended behind a task
          // that is not its own: another cgroup's, a kernel thread, or a
          // task of a higher class (real-time, deadline), whose cgroup the
          // split does not say (held_by is one split: its classes add up
          // to all of the cgroup's waits). A real-time daemon of the root
          // cgroup is a neighbour too; the alert's holder ratio names it.
          {
            record: 'cgroup:schedlat_runqueue_wait_held_by_others:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_by_cause_seconds_total', cgroupLabels, ['split="held_by"', 'cause=~"other_cgroup|kernel|higher_class"'])
                  + '\n/\n'
                  + lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_by_cause_seconds_total', cgroupLabels, ['split="held_by"']),
          },
          // Of a cgroup's measured waits, the share its own task group spent
          // throttled by its cpu.max quota: the self-inflicted part.
          {
            record: 'cgroup:schedlat_runqueue_wait_throttled:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_overlap_seconds_total', cgroupLabels, ['overlap="throttled"'])
                  + '\n/\n'
                  + lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_overlap_measured_seconds_total', cgroupLabels),
          },
          // Of a cgroup's wait time, the share that ended behind one named
          // holder cgroup (the neighbour-pairs family).
          {
            record: 'cgroup_holder:schedlat_neighbour_wait_seconds:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_neighbour_wait_seconds_total', cgroupLabels + ['holder_' + l for l in cgroupLabels])
                  + '\n/ on (job, instance, cgroup) group_left ()\n'
                  + lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_by_cause_seconds_total', ['cgroup'], ['split="held_by"']),
          },
          // The second role: of a cgroup's wait time, the share charged to
          // a holder cgroup as having used the share of a group the victim
          // is in (`group`) just before waits that lost there.
          {
            record: 'cgroup_holder:schedlat_neighbour_share_seconds:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_neighbour_share_seconds_total', cgroupLabels + ['holder_' + l for l in cgroupLabels] + ['group'])
                  + '\n/ on (job, instance, cgroup) group_left ()\n'
                  + lib.sumRate(config, 'schedlat_cgroup_runqueue_wait_by_cause_seconds_total', ['cgroup'], ['split="held_by"']),
          },
        ],
      },
      {
        name: 'schedlat-decision',
        rules: [
          // Per split, each class' share of the host's wait time (every wait
          // is in one class of each split, so a split's shares add up to 1).
          {
            record: 'instance_split_class:schedlat_runqueue_wait_by_decision_seconds:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_runqueue_wait_by_decision_seconds_total', ['split', 'class'])
                  + '\n/ ignoring (class) group_left ()\n'
                  + lib.sumRate(config, 'schedlat_runqueue_wait_by_decision_seconds_total', ['split']),
          },
          {
            record: 'instance_split_class:schedlat_runqueue_waits_by_decision:' + r,
            expr: lib.sumRate(config, 'schedlat_runqueue_waits_by_decision_total', ['split', 'class']),
          },
          // The share of wait time a scheduler rule declined the wakeup for
          // (EEVDF's eligibility, deadline or slice protection; CFS's wakeup
          // granularity...): high, the waits are the scheduler's policy at
          // work, not a shortage of CPUs.
          {
            record: 'instance:schedlat_runqueue_wait_declined:ratio_' + r,
            expr: lib.sumRate(config, 'schedlat_runqueue_wait_by_decision_seconds_total', [], ['split="decision"', std.format('class=~"%s"', [config.declinedClasses])])
                  + '\n/\n'
                  + lib.sumRate(config, 'schedlat_runqueue_wait_by_decision_seconds_total', [], ['split="decision"']),
          },
        ],
      },
    ],
  },
}
