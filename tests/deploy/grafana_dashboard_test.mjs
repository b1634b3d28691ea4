// Issue 6 §2: the dashboards in deploy/grafana/dashboards type-check against
// Grafana's published schema (npm @grafana/schema, with typescript), and are
// provisioned as users expect: a datasource template variable (no
// ${DS_...} inputs), every panel and annotation on that variable, and the
// provisioning files point where the README mounts them.
//
//   node grafana_dashboard_test.mjs REPO_ROOT
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { need, nodeDir, resolvePath, fail } from "./node_deps.mjs";

const root = process.argv[2] || fail("usage: grafana_dashboard_test.mjs REPO_ROOT");
const YAML = need("yaml");
const tsc = join(resolvePath("typescript/package.json"), "..", "bin", "tsc");
resolvePath("@grafana/schema/package.json");
const dashboards = join(root, "deploy", "grafana", "dashboards");
let failures = 0;
const problem = (what) => {
  console.error(`FAIL ${what}`);
  failures++;
};

const files = readdirSync(dashboards).filter((f) => f.endsWith(".json"));
if (!files.length) fail(`no dashboards in ${dashboards}`);
const titles = [];
for (const file of files) {
  const text = readFileSync(join(dashboards, file), "utf8");
  if (text.includes("${DS_")) problem(`${file}: uses \${DS_...} import inputs; use the datasource variable`);
  const d = JSON.parse(text);
  titles.push(d.title);
  const vars = d.templating?.list || [];
  if (!vars.some((v) => v.type === "datasource" && v.name === "datasource" && v.query === "prometheus")) {
    problem(`${file}: no datasource template variable named "datasource" of type prometheus`);
  }
  for (const p of d.panels || []) {
    if (p.datasource?.uid !== "${datasource}") problem(`${file}: panel "${p.title}" not on \${datasource}`);
    if (!p.targets?.length) problem(`${file}: panel "${p.title}" has no query`);
    for (const t of p.targets || []) {
      if (!t.expr) problem(`${file}: panel "${p.title}" target ${t.refId} has no expr`);
    }
  }
  for (const a of (d.annotations?.list || []).filter((a) => !a.builtIn)) {
    if (a.datasource?.uid !== "${datasource}") problem(`${file}: annotation "${a.name}" not on \${datasource}`);
  }

  // The type check: the JSON as a TypeScript literal that must satisfy
  // Dashboard (excess properties and wrong types are errors). The schema's
  // DataQuery is open for each datasource's own fields; ours are checked as
  // Prometheus queries (PromQuery below: Grafana's Prometheus query model,
  // which @grafana/schema does not publish).
  const queries = [];
  const mark = (q) => `__QUERY_${queries.push(q) - 1}__`;
  const copy = JSON.parse(text);
  for (const p of copy.panels || []) p.targets = (p.targets || []).map(mark);
  for (const a of copy.annotations?.list || []) if (a.target) a.target = mark(a.target);
  const literal = JSON.stringify(copy, null, 2).replace(/"__QUERY_(\d+)__"/g,
    (_, i) => `q(${JSON.stringify(queries[Number(i)])})`);
  const work = mkdtempSync(join(nodeDir, "tsc-"));
  try {
    writeFileSync(join(work, "check.ts"),
      `import type { Dashboard, DataQuery } from "@grafana/schema";\n` +
      `type PromQuery = DataQuery & { expr: string; legendFormat?: string; range?: boolean;\n` +
      `  instant?: boolean; format?: "time_series" | "table" | "heatmap"; interval?: string;\n` +
      `  step?: string; titleFormat?: string; textFormat?: string; useValueForTime?: boolean;\n` +
      `  exemplar?: boolean; editorMode?: "code" | "builder" };\n` +
      // Panels take Record<string, unknown>, annotations DataQuery.
      `const q = (query: PromQuery) => query as PromQuery & Record<string, unknown>;\n` +
      `export const dashboard = ${literal} satisfies Dashboard;\n`);
    writeFileSync(join(work, "tsconfig.json"), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: "esnext", moduleResolution: "bundler",
                         target: "es2022", skipLibCheck: true, lib: ["es2022", "dom"] },
      files: ["check.ts"] }));
    execFileSync(process.execPath, [tsc, "-p", work], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    console.log(`ok   ${file}: type-checks as @grafana/schema Dashboard`);
  } catch (e) {
    problem(`${file}: does not type-check as @grafana/schema Dashboard:\n${e.stdout || ""}${e.stderr || e.message}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
if (!titles.includes("zbpp / pipeline")) problem(`no dashboard titled "zbpp / pipeline" (found ${titles})`);

// Provisioning files.
const prov = join(root, "deploy", "grafana", "provisioning");
const providers = readdirSync(join(prov, "dashboards")).filter((f) => f.endsWith(".yaml"))
  .flatMap((f) => YAML.parse(readFileSync(join(prov, "dashboards", f), "utf8")).providers || []);
if (!providers.some((p) => p.type === "file" && p.options?.path)) problem("no file dashboard provider");
const sources = readdirSync(join(prov, "datasources")).filter((f) => f.endsWith(".yaml"))
  .flatMap((f) => YAML.parse(readFileSync(join(prov, "datasources", f), "utf8")).datasources || []);
if (!sources.some((s) => s.type === "prometheus")) problem("no prometheus datasource provisioned");

if (failures) fail(`${failures} problem(s)`);
console.log("grafana dashboards: schema and provisioning ok");
