// Where the deploy tests find their npm packages: the cache directory that
// scripts/deploy-test-deps.sh installs tests/deploy/package.json into
// (ZBPP_DEPLOY_NODE_DIR, default ~/.cache/zbpp/deploy-node). A missing
// package fails the test with the command that installs it.
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const nodeDir =
  process.env.ZBPP_DEPLOY_NODE_DIR || join(homedir(), ".cache", "zbpp", "deploy-node");

const require = createRequire(join(nodeDir, "package.json"));

/// require() of `name` from the cache directory, or exit 1 naming the fix.
export function need(name) {
  try {
    return require(name);
  } catch (e) {
    fail(`npm package ${name} not found under ${nodeDir} (${e.code}); run scripts/deploy-test-deps.sh`);
  }
}

/// Path of an installed file (e.g. typescript's bin), or exit 1.
export function resolvePath(name) {
  try {
    return require.resolve(name);
  } catch (e) {
    fail(`${name} not found under ${nodeDir}; run scripts/deploy-test-deps.sh`);
  }
}

export function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

export function fileExists(path) {
  return existsSync(path);
}
