#!/usr/bin/env bun
/**
 * Write docs/kerncap.1, the manual page generated from the verb table (src/cli/man.ts).
 * `--check`: write nothing; exit 1 when docs/kerncap.1 is not what the verb table makes now
 * (test/cpu/man.test.ts does the same). Run it after changing a verb's options or examples:
 *   node_modules/.bin/bun scripts/make-man.ts
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { manPage } from "../src/cli/man.ts";
import { commands } from "../src/cli/verbs.ts";
import { TOOL_VERSION } from "../src/version.ts";

const out = join(import.meta.dir, "..", "docs", "kerncap.1");
const page = await manPage(commands, TOOL_VERSION);
if (process.argv.includes("--check")) {
  let now = "";
  try {
    now = readFileSync(out, "utf8");
  } catch {
    /* missing: not current */
  }
  if (now !== page) {
    console.error("make-man: docs/kerncap.1 is not current; run: node_modules/.bin/bun scripts/make-man.ts");
    process.exit(1);
  }
} else {
  writeFileSync(out, page);
  console.log(`make-man: ${out}`);
}
