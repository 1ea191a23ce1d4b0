// Validates Kubernetes objects against the API's OpenAPI schemas (Kubernetes 1.27 through
// kubernetes-models; the Prometheus Operator's CRDs through its package).
//
//   node validate.cjs < objects.yaml      one line per object: "ok KIND NAME" or
//                                         "invalid KIND NAME: what is wrong"; exit 1 if any
//                                         object is invalid or of a kind with no schema here
//
// Installed by `npm ci` in this directory (scripts/test.sh does it; package-lock.json pins
// every package).
"use strict";
const fs = require("fs");
const YAML = require("yaml");

function modelFor(apiVersion, kind) {
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  const module =
    group === "" ? `kubernetes-models/${version}`
    : group === "monitoring.coreos.com" ? `@kubernetes-models/prometheus-operator/${group}/${version}`
    : `kubernetes-models/${group}/${version}`;
  try {
    return require(module)[kind];
  } catch (error) {
    return undefined;
  }
}

let failures = 0;
const documents = YAML.parseAllDocuments(fs.readFileSync(0, "utf8"));
for (const document of documents) {
  if (document.errors.length) {
    console.log(`invalid YAML: ${document.errors[0].message}`);
    failures++;
    continue;
  }
  const object = document.toJS();
  if (!object) continue;
  const name = `${object.kind} ${object.metadata && object.metadata.name}`;
  const Model = object.apiVersion && object.kind && modelFor(object.apiVersion, object.kind);
  if (!Model) {
    console.log(`invalid ${name}: no schema for ${object.apiVersion} ${object.kind}`);
    failures++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok ${name}`);
  } catch (error) {
    console.log(`invalid ${name}: ${error.message}`);
    failures++;
  }
}
process.exit(failures ? 1 : 0);
