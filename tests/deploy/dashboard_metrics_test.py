"""Every metric that deploy/ queries is one the coordinator exports, and every
exported one is documented: the names in the Grafana dashboards' panel and
annotation queries and in deploy/prometheus/rules.yml's expressions are
families registered in metrics/coordinator_metrics.cc (a histogram's
_bucket, _sum and _count series included) or recording rules of rules.yml;
each family and recording rule is listed in deploy/README.md. A renamed or
removed family fails here without a live stack (live_stack_test.py checks
the same queries for data, on a running job).

    python dashboard_metrics_test.py REPO_ROOT
"""

import json
import re
import sys
from pathlib import Path

from deploytest import Tally, fail, need

yaml = need("yaml", "PyYAML")

# A family's registration: BuildGauge().Name("zbpp_...") (whitespace between).
REGISTERED = re.compile(r'Build(Gauge|Counter|Histogram)\(\)\s*\.Name\("(zbpp_[a-z0-9_]+)"\)')
# PromQL identifiers (metric, label, function names and recording rules).
IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")


def exported_families(source):
    """{name: type} of the families the coordinator registers."""
    return {name: kind for kind, name in REGISTERED.findall(source)}


def series_names(families):
    """The names a scrape can hold: a histogram's three series per family."""
    names = set()
    for name, kind in families.items():
        if kind == "Histogram":
            names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(name)
    return names


def queried(expr):
    """zbpp metric and recording-rule names in a PromQL expression (quoted
    label values and Grafana's $variables left out)."""
    bare = QUOTED.sub('""', expr)
    return {
        name
        for name in IDENTIFIER.findall(bare)
        if name.startswith("zbpp_") or ":zbpp_" in name
    }


def dashboard_queries(path):
    """(where, expr) of every panel target and annotation of a dashboard."""
    data = json.loads(path.read_text())
    for panel in data.get("panels", []):
        for target in panel.get("targets", []):
            yield f'{path.name} panel "{panel.get("title")}" {target.get("refId")}', target.get(
                "expr", ""
            )
    for annotation in data.get("annotations", {}).get("list", []):
        expr = (annotation.get("target") or {}).get("expr")
        if expr:
            yield f'{path.name} annotation "{annotation.get("name")}"', expr


def rule_queries(rules):
    """(where, expr) of every recording and alerting rule, and the recorded names."""
    queries, recorded = [], set()
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("record") or rule.get("alert")
            queries.append((f"rules.yml {name}", rule.get("expr", "")))
            if rule.get("record"):
                recorded.add(rule["record"])
    return queries, recorded


def unknown(expr, known):
    """The names `expr` queries that are neither exported nor recorded."""
    return sorted(queried(expr) - known)


def main():
    if len(sys.argv) != 2:
        fail("usage: dashboard_metrics_test.py REPO_ROOT")
    root = Path(sys.argv[1])
    families = exported_families((root / "metrics/coordinator_metrics.cc").read_text())
    if len(families) < 10:
        fail(f"found only {sorted(families)} in metrics/coordinator_metrics.cc: the pattern is stale")
    rules = yaml.safe_load((root / "deploy/prometheus/rules.yml").read_text())
    queries, recorded = rule_queries(rules)
    known = series_names(families) | recorded
    tally = Tally()

    # The checker itself: an unknown name must be caught, a quoted one not.
    tally.expect(
        unknown('rate(zbpp_no_such_total{job_id=~"zbpp_x"}[5m])', known) == ["zbpp_no_such_total"],
        "harness: an unknown metric name is not caught",
    )

    dashboards = sorted((root / "deploy/grafana/dashboards").glob("*.json"))
    for path in dashboards:
        queries.extend(dashboard_queries(path))
    checked = 0
    for where, expr in queries:
        names = queried(expr)
        tally.expect(names, f"{where}: queries no zbpp metric: {expr}")
        for name in unknown(expr, known):
            tally.problem(f"{where}: {name} is neither exported nor a recording rule: {expr}")
        checked += 1
    tally.ok(f"{checked} queries of {len(dashboards)} dashboards and rules.yml use exported names")

    readme = (root / "deploy/README.md").read_text()
    for name in sorted(set(families) | recorded):
        tally.expect(f"`{name}`" in readme, f"deploy/README.md does not document `{name}`")
    tally.finish(f"{len(families)} families and {len(recorded)} recording rules documented")


if __name__ == "__main__":
    main()
