"""Reads an OpenMetrics exposition (serve --exemplars) on stdin with the
Prometheus Python client's own parser, which refuses the whole body over
one sample or exemplar it cannot read, and prints each exemplar's labels
as a JSON line: a reader schedlat did not write (tests/exemplars.rs)."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

body = sys.stdin.read()
exemplars = 0
for family in text_string_to_metric_families(body):
    for sample in family.samples:
        if sample.exemplar is not None:
            print(json.dumps(sample.exemplar.labels))
            exemplars += 1
print(f"{exemplars} exemplars", file=sys.stderr)
