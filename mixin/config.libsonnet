// What the rules, alerts and dashboard assume about the metrics and about
// what is worth a page. Override any field when importing the mixin:
//   (import 'schedlat-mixin/mixin.libsonnet') + { _config+:: { selector: 'job="node-schedlat"' } }
{
  _config+:: {
    // Every expression selects schedlat's series with this.
    selector: 'job="schedlat"',
    // rate() window of the recording rules. Keep it at least four scrape
    // intervals: a per-key series is only exported in scrapes after the key
    // waited (docs/prometheus.md, "Per cgroup, per process, and a fleet").
    rateWindow: '5m',

    // The workload levels of the per-cgroup family, finest last. The labels
    // are cAdvisor's (namespace, pod, container) plus the systemd unit, so
    // that the recorded series join with container_* metrics unrelabelled.
    levels: [
      { name: 'namespace_pod_container', labels: ['namespace', 'pod', 'container'], present: 'container' },
      { name: 'namespace_pod', labels: ['namespace', 'pod'], present: 'pod' },
      { name: 'unit', labels: ['unit'], present: 'unit' },
      { name: 'cgroup', labels: ['cgroup', 'namespace', 'pod', 'container', 'unit'], present: 'cgroup' },
    ],
    quantiles: [0.5, 0.9, 0.99],

    // RunqueueLatencyHigh: a workload's p99 wait above this, for this long,
    // while it waits at least minWaitsPerSecond times a second (a p99 of a
    // handful of waits is noise, not a page).
    latencyHighSeconds: 0.005,
    latencyHighFor: '10m',
    minWaitsPerSecond: 1,
    // Workloads the latency alerts judge (a CPU-bound batch job waits by
    // design): a label matcher added to the workload series, e.g.
    // 'namespace!~"batch-.*"'.
    workloadFilter: 'cgroup!="__overflow__"',

    // NoisyNeighbour: of the victim's wait time, at least heldByOthersShare
    // ended behind other workloads (another cgroup's tasks, kernel
    // threads, real-time or deadline tasks) and at least neighbourShare behind the
    // one named, while its own quota throttling covered less than
    // ownThrottledShareMax of its measured waits.
    heldByOthersShare: 0.5,
    neighbourShare: 0.2,
    ownThrottledShareMax: 0.1,
    neighbourFor: '10m',

    // QuotaThrottlingWaits: its own cpu.max throttling covers at least this
    // share of its measured waits, and it waits at least throttledMinWaitRate
    // seconds per second (0.05: 5% of one CPU's time spent queued).
    throttledShare: 0.5,
    throttledMinWaitRate: 0.05,
    throttledFor: '10m',

    // StealHigh: the hypervisor ran another vCPU during at least this share
    // of the host's measured waits, with at least stealMinWaitRate seconds
    // of waits per second.
    stealShare: 0.2,
    stealMinWaitRate: 0.05,
    stealFor: '10m',

    // ExporterCost: schedlat's own BPF programs above this many CPU seconds
    // per second (0.02: 2% of one CPU), for this long.
    exporterBpfCpuBudget: 0.02,
    exporterCostFor: '15m',

    // Where the alerts' runbook_url points; the anchor is the alert's name
    // in lower case.
    runbookURL: 'https://example.invalid/schedlat/blob/main/mixin/runbooks.md',

    // The dashboard's stacked splits: share of wait time by cause
    // (schedlat_runqueue_wait_by_cause_seconds_total{split}), one panel each.
    causeSplits: [
      { split: 'began', title: 'How waits began', description: 'Woken, new, or preempted (switched out still runnable).' },
      { split: 'placement', title: 'Where waits ended', description: 'On the CPU the task last ran on, or migrated.' },
      { split: 'held_by', title: 'Who held the CPU', description: 'When the wait ended: the same cgroup, another cgroup, a kernel thread, a higher class, idle.' },
      { split: 'queue_depth', title: 'Queue depth at enqueue', description: 'Other tasks queued on the CPU when the task was queued.' },
    ],
    // The scheduler's decision for each wait
    // (schedlat_runqueue_wait_by_decision_seconds_total{split,class}): every
    // wait is in one class of each split. One panel each.
    decisionSplits: [
      { split: 'outcome', title: 'What the wakeup got', description: 'Granted (asked for the CPU, ran at the next switch, promptly), late (asked, nobody else ran, but the running task kept the CPU until a tick ended its slice, or, asked lazily, until a preemption inside the kernel), declined (a rule declined, ran at the next switch), passed over (others ran first), idle CPU, other (not a wakeup, migrated).' },
      { split: 'decision', title: 'What the scheduler decided', description: 'At the wakeup: requested, slice ended, pending, lazy, idle, not a wakeup; or the rule that declined it (not eligible, later deadline, protected slice, policy, other class, wakeup granularity).' },
      { split: 'passes', title: 'Times passed over', description: 'Switches to other tasks on the waiting CPU during the wait: 0, 1, 2, 3+, migrated.' },
      { split: 'holder', title: 'How the holder left', description: 'How the task that held the CPU left it at the switch that ended the wait: blocked, preempted, slice ended, exited.' },
    ],
    // The decision classes that mean "a scheduler rule kept the task
    // waiting" (split="decision"): their share of wait time is recorded.
    declinedClasses: 'not_eligible|later_deadline|protected|policy_gate|other_class|wakeup_granularity|rule_unknown|ext',

    dashboardUID: 'schedlat-runqueue',
    dashboardTags: ['schedlat', 'scheduler'],
  },
}
