"""deploy/grafana/grail-dashboard.json asks only for what grail-server exports.

Every PromQL expression's metric names must be series the server registers
(server/metrics/server_metrics.cc, server/metrics/process_metrics.cc: read, not copied), with labels those
metrics carry; every expression must parse (the real PromQL parser: promtool check rules);
the panels the observability issue asks for must be there.
"""

import json
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import yaml

import grail_sources

DASHBOARD = grail_sources.DEPLOY / "grafana" / "grail-dashboard.json"

# PromQL words that are not metric names: keywords, binary operators, aggregation operators
# (which may precede `by (...)` rather than a parenthesis).
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "atan2", "inf", "nan", "sum", "min", "max", "avg", "group",
    "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
}
GROUPING = r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)


def metric_names(expr):
    """Metric names an expression selects: identifiers that are not functions (followed by
    `(`), not keywords, not label names (inside `{}` or a grouping clause)."""
    s = strip_strings(expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(GROUPING, " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        word = m.group(0)
        if s[m.end():].lstrip().startswith("(") or word in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def selector_labels(expr):
    """(metric, label) for every label matcher `metric{label op "..."}`."""
    pairs = []
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", strip_strings(expr)):
        for label in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2)):
            pairs.append((m.group(1), label))
    return pairs


def grouping_labels(expr):
    labels = []
    for m in re.finditer(GROUPING, strip_strings(expr)):
        labels += [x.strip() for x in m.group(2).split(",") if x.strip()]
    return labels


def for_promtool(expr):
    """The expression with Grafana's variables replaced by what they stand for."""
    expr = re.sub(r"\[\$__rate_interval\]|\[\$__interval\]|\[\$__range\]", "[5m]", expr)
    expr = re.sub(r"\$\{?\w+\}?", ".*", expr)  # multi-value variables in =~ matchers
    return expr


def panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dashboard = json.loads(DASHBOARD.read_text())
        cls.series = grail_sources.exported_series()
        cls.graphs = [p for p in panels(cls.dashboard) if p["type"] != "row"]
        cls.exprs = [t["expr"] for p in cls.graphs for t in p.get("targets", [])]

    def test_extracts_names_the_way_promql_reads_them(self):
        expr = ('histogram_quantile(0.99, sum by (le, method) (rate(a_bucket{code!="OK",'
                'instance=~"$instance"}[$__rate_interval]))) / sum(b_total) by (method) '
                '+ on(job) group_left(version) c_info offset 5m > bool 1e-3')
        self.assertEqual(metric_names(expr), {"a_bucket", "b_total", "c_info"})
        self.assertEqual(selector_labels(expr), [("a_bucket", "code"), ("a_bucket", "instance")])
        self.assertEqual(grouping_labels(expr), ["le", "method", "method", "job", "version"])

    def test_is_a_grafana_dashboard_over_a_prometheus_datasource_variable(self):
        self.assertGreaterEqual(self.dashboard["schemaVersion"], 36)
        variables = {v["name"]: v for v in self.dashboard["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        ids = [p["id"] for p in panels(self.dashboard)]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        for panel in self.graphs:
            with self.subTest(panel=panel["title"]):
                self.assertEqual(panel["datasource"]["uid"], "${datasource}")
                self.assertIn("gridPos", panel)

    def test_every_panel_has_a_query(self):
        self.assertGreaterEqual(len(self.graphs), 10)
        for panel in self.graphs:
            with self.subTest(panel=panel["title"]):
                self.assertTrue(panel.get("targets"), "no targets")
                for target in panel["targets"]:
                    self.assertTrue(target.get("expr", "").strip(), f"empty expr in {target}")
                    self.assertEqual(target.get("datasource", panel["datasource"])["uid"],
                                     "${datasource}")

    def test_every_metric_is_exported_by_the_server(self):
        queries = list(self.exprs)
        for variable in self.dashboard["templating"]["list"]:
            query = variable.get("query")
            if isinstance(query, dict):
                query = query.get("query", "")
            if variable["type"] == "query":
                queries += re.findall(r"label_values\(\s*([^,)]+)", query)
        for expr in queries:
            for name in metric_names(expr):
                with self.subTest(metric=name, expr=expr):
                    self.assertTrue(name in self.series, f"{name} is not exported by "
                                    "grail-server (server_metrics.cc, process_metrics.cc)")

    def test_every_label_is_one_the_metric_carries(self):
        for expr in self.exprs:
            for metric, label in selector_labels(expr):
                if metric not in self.series:
                    continue  # test_every_metric_is_exported_by_the_server says so
                allowed = self.series[metric].labels | grail_sources.TARGET_LABELS
                if metric.endswith("_bucket"):
                    allowed = allowed | {"le"}
                with self.subTest(expr=expr, label=label):
                    self.assertIn(label, allowed, f"{metric} has no label {label}")
            if not metric_names(expr) <= self.series.keys():
                continue  # test_every_metric_is_exported_by_the_server says so
            in_expr = set()
            for name in metric_names(expr):
                in_expr |= self.series[name].labels
                if name.endswith("_bucket"):
                    in_expr.add("le")
            for label in grouping_labels(expr):
                with self.subTest(expr=expr, label=label):
                    self.assertIn(label, in_expr | grail_sources.TARGET_LABELS)

    def test_quantiles_aggregate_buckets_by_le(self):
        for expr in self.exprs:
            if "histogram_quantile" not in expr:
                continue
            with self.subTest(expr=expr):
                self.assertTrue(all(n.endswith("_bucket") for n in metric_names(expr)))
                self.assertTrue(all("le" in [x.strip() for x in m.group(2).split(",")]
                                    for m in re.finditer(GROUPING, expr)),
                                "a quantile over buckets must keep `le`")

    def test_covers_what_the_issue_asks_for(self):
        used = set()
        for expr in self.exprs:
            used |= metric_names(expr)
        wanted = {
            "grail_requests_total",                       # rate and error ratio by method
            "grail_request_duration_seconds_bucket",      # p50/p99 by method
            "grail_batch_size_bucket", "grail_batch_size_sum", "grail_batch_size_count",
            "grail_queue_wait_seconds_bucket",
            "grail_facts_ingested_total", "grail_ingest_chunk_duration_seconds_bucket",
            "grail_graph_entities", "grail_graph_facts",
            "grail_subgraph_nodes_bucket", "grail_forward_seconds_bucket",
            "process_cpu_seconds_total", "process_resident_memory_bytes",
            # scheduling: refusals by limit, work dropped by deadline/cancellation, load
            "grail_rejected_calls_total", "grail_dropped_calls_total",
            "grail_dropped_subgraphs_total", "grail_calls_in_flight", "grail_pending_subgraphs",
            # replication: how far each replica is behind the stream
            "grail_replication_pending_chunks", "grail_replication_applied_sequence",
        }
        self.assertEqual(wanted - used, set())
        self.assertTrue(any('code!="OK"' in e.replace(" ", "") for e in self.exprs),
                        "no error ratio (code!=\"OK\")")

    def test_promql_parses(self):
        promtool = grail_sources.tool_or_skip(self, "promtool")
        rules = [{"record": f"dashboard:expr_{i}", "expr": for_promtool(e)}
                 for i, e in enumerate(self.exprs)]
        for rule in rules:
            self.assertNotIn("$", rule["expr"], "a Grafana variable left unexpanded")
        with tempfile.TemporaryDirectory() as work:
            path = Path(work) / "rules.yml"
            path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
            result = subprocess.run([promtool, "check", "rules", str(path)],
                                    capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main(argv=grail_sources.split_args(sys.argv)[1], verbosity=2)
