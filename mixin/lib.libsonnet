// PromQL building blocks shared by the rules, the alerts and the dashboard.
{
  // `{job="schedlat",extra...}`: the mixin's selector plus matchers.
  selector(config, extra=[]):: '{' + std.join(',', [config.selector] + std.prune(extra)) + '}',

  // Every aggregation keeps the scrape target: a cgroup path or a pid is
  // only unique on its host.
  by(labels):: std.join(', ', ['job', 'instance'] + labels),

  // The name suffix of a rate over the mixin's window: rate5m.
  rateName(config):: 'rate' + config.rateWindow,

  // A quantile of a histogram family, from its native histogram where
  // Prometheus stored one, else from its classic buckets: the two sides of
  // `or` have the same labels, so a series that has both (Prometheus 3.x
  // with always_scrape_classic_histograms) is counted once, natively.
  quantile(config, q, family, labels, extra=[])::
    local s = self.selector(config, extra);
    local by = self.by(labels);
    std.format('histogram_quantile(%g, sum by (%s) (rate(%s%s[%s])))', [q, by, family, s, config.rateWindow])
    + '\nor\n'
    + std.format('histogram_quantile(%g, sum by (%s, le) (rate(%s_bucket%s[%s])))', [q, by, family, s, config.rateWindow]),

  // Waits per second (what = 'count') or seconds waited per second
  // (what = 'sum') of a histogram family, native or classic as above.
  histogramRate(config, what, family, labels, extra=[])::
    local s = self.selector(config, extra);
    local by = self.by(labels);
    std.format('histogram_%s(sum by (%s) (rate(%s%s[%s])))', [what, by, family, s, config.rateWindow])
    + '\nor\n'
    + std.format('sum by (%s) (rate(%s_%s%s[%s]))', [by, family, what, s, config.rateWindow]),

  // `sum by (labels) (rate(metric{selector,extra}[window]))`.
  sumRate(config, metric, labels, extra=[])::
    std.format('sum by (%s) (rate(%s%s[%s]))', [self.by(labels), metric, self.selector(config, extra), config.rateWindow]),

  // Percent for names: 0.99 -> 99.
  percent(q):: std.toString(std.floor(q * 100 + 0.5)),
}
