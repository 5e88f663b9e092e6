// Validates every ServiceMonitor of a YAML stream (argv[2]) against
// prometheus-operator's CRD schema (@kubernetes-models/prometheus-operator):
// "ok NAME" per valid one, "invalid NAME: why" and exit status 1 otherwise.
// tests/deploy.rs runs it; `cargo xtask setup` installs it with its
// packages in target/npm/deploy.
import fs from "fs";
import yaml from "js-yaml";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

let found = 0;
for (const doc of yaml.loadAll(fs.readFileSync(process.argv[2], "utf8"))) {
  if (!doc || doc.kind !== "ServiceMonitor") continue;
  found += 1;
  try {
    new ServiceMonitor(doc).validate();
    console.log(`ok ${doc.metadata.name}`);
  } catch (e) {
    console.log(`invalid ${doc.metadata.name}: ${e.message}`);
    process.exitCode = 1;
  }
}
if (found === 0) {
  console.log("no ServiceMonitor in the input");
  process.exitCode = 1;
}
