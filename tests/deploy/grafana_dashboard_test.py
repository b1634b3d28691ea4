"""The dashboards in deploy/grafana/dashboards fit Grafana's dashboard schema
(as Grafana's SDK grafana-foundation-sdk models it, see grafana_schema.py),
every query as a Prometheus query, and are provisioned as users expect: a
datasource template variable (no ${DS_...} import inputs), every panel and
annotation on that variable, and provisioning files that point where the
README mounts them.

    python grafana_dashboard_test.py REPO_ROOT
"""

import json
import sys
from pathlib import Path

from deploytest import Tally, fail, need

yaml = need("yaml", "PyYAML")
import grafana_schema  # noqa: E402
from grafana_foundation_sdk.models import dashboard  # noqa: E402

DATASOURCE = "${datasource}"


def datasource(entry):
    """The datasource reference of a panel or an annotation ({} if none)."""
    return entry.get("datasource") or {}


def check_schema(tally, name, data):
    """The dashboard against the schema; Prometheus annotation targets apart."""
    copy = json.loads(json.dumps(data))
    for i, annotation in enumerate(copy.get("annotations", {}).get("list", [])):
        if datasource(annotation).get("type") == "prometheus" and "target" in annotation:
            target = annotation.pop("target")
            for p in grafana_schema.problems(grafana_schema.PrometheusAnnotationTarget, target):
                tally.problem(f"{name}: annotations.list[{i}].target{p[1:]}")
    found = grafana_schema.problems(dashboard.Dashboard, copy)
    for p in found:
        tally.problem(f"{name}: {p}")
    if not found:
        tally.ok(f"{name}: fits Grafana's dashboard schema, queries as Prometheus queries")


def check_conventions(tally, name, text, data):
    """The datasource variable, and every panel and annotation on it."""
    tally.expect(
        "${DS_" not in text, f"{name}: uses ${{DS_...}} import inputs; use the datasource variable"
    )
    variables = data.get("templating", {}).get("list", [])
    tally.expect(
        any(
            v.get("type") == "datasource"
            and v.get("name") == "datasource"
            and v.get("query") == "prometheus"
            for v in variables
        ),
        f'{name}: no datasource template variable named "datasource" of type prometheus',
    )
    for panel in data.get("panels", []):
        title = panel.get("title")
        tally.expect(
            datasource(panel).get("uid") == DATASOURCE,
            f'{name}: panel "{title}" not on {DATASOURCE}',
        )
        tally.expect(panel.get("targets"), f'{name}: panel "{title}" has no query')
        for target in panel.get("targets", []):
            tally.expect(
                target.get("expr"),
                f'{name}: panel "{title}" target {target.get("refId")} has no expr',
            )
    for annotation in data.get("annotations", {}).get("list", []):
        if not annotation.get("builtIn"):
            tally.expect(
                datasource(annotation).get("uid") == DATASOURCE,
                f'{name}: annotation "{annotation.get("name")}" not on {DATASOURCE}',
            )


def check_provisioning(tally, provisioning):
    """A file dashboard provider with a path, and a Prometheus datasource."""

    def entries(folder, key):
        return [
            entry
            for f in sorted((provisioning / folder).glob("*.yaml"))
            for entry in (yaml.safe_load(f.read_text()) or {}).get(key) or []
        ]

    tally.expect(
        any(
            p.get("type") == "file" and (p.get("options") or {}).get("path")
            for p in entries("dashboards", "providers")
        ),
        "no file dashboard provider",
    )
    tally.expect(
        any(s.get("type") == "prometheus" for s in entries("datasources", "datasources")),
        "no prometheus datasource provisioned",
    )


def main():
    if len(sys.argv) != 2:
        fail("usage: grafana_dashboard_test.py REPO_ROOT")
    grafana = Path(sys.argv[1]) / "deploy" / "grafana"
    files = sorted((grafana / "dashboards").glob("*.json"))
    if not files:
        fail(f"no dashboards in {grafana / 'dashboards'}")
    tally, titles = Tally(), []
    for path in files:
        text = path.read_text()
        data = json.loads(text)
        titles.append(data.get("title"))
        check_conventions(tally, path.name, text, data)
        check_schema(tally, path.name, data)
    tally.expect(
        "zbpp / pipeline" in titles, f'no dashboard titled "zbpp / pipeline" (found {titles})'
    )
    check_provisioning(tally, grafana / "provisioning")
    tally.finish("grafana dashboards: schema and provisioning ok")


if __name__ == "__main__":
    main()
