#!/usr/bin/env bun
/**
 * Write docs/errors.md, the list of error codes generated from their table (src/error-codes.ts).
 * `--check`: write nothing; exit 1 when docs/errors.md is not what the table makes now
 * (test/cpu/error-codes.test.ts does the same). Run it after adding or changing a code:
 *   node_modules/.bin/bun scripts/make-errors-doc.ts
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ERROR_CODES } from "../src/error-codes.ts";

/** docs/errors.md's text: one row per code, in the table's order. */
export function errorsMarkdown(): string {
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const rows = Object.entries(ERROR_CODES).map(([code, r]) => `| \`${code}\` | ${r.exit} | ${cell(r.about)} | ${cell(r.hint)} |`);
  return [
    "# Error codes",
    "",
    "<!-- generated from src/error-codes.ts by scripts/make-errors-doc.ts: edit the table, then run the script -->",
    "",
    "Every error kerncap reports carries one of these codes: in the `error` document of `--json`",
    "(`{ error: { code, message, hint } }`, and `details` where the error has structured facts:",
    "tune's `configs`, each config's build, and its `warnings` (what it said on stderr before the configs ran); `E_BUILD`'s `diagnostics[]`, the compiler's diagnostics",
    "`{file, line, column, severity, text}` with `file` relative to the capture (`src/k.cu`), `column`",
    "null in nvcc's own form, `severity` `error`, `warning` or `fatal`, empty where none can be shown;",
    "`E_NO_GPU`'s `rebuild` from validate), in a `validate --watch --json` error line, and as the",
    "`code` of a `check` or `eval` record; on stderr kerncap prints the code and the message",
    "(`ERROR  E_NO_GPU: …`) and, under it, the hint. The codes are stable (scripts match on them).",
    "The exit status is the process's when the error ends a verb (a MISMATCH is exit 1 and no",
    "error). The hint below is the one shown when the throw site has no more precise one of its own",
    "(a path, the option to change).",
    "",
    "| code | exit | when | what to do |",
    "|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

if (import.meta.main) {
  const out = join(import.meta.dir, "..", "docs", "errors.md");
  const page = errorsMarkdown();
  if (process.argv.includes("--check")) {
    let now = "";
    try {
      now = readFileSync(out, "utf8");
    } catch {
      /* missing: not current */
    }
    if (now !== page) {
      console.error("make-errors-doc: docs/errors.md is not current; run: node_modules/.bin/bun scripts/make-errors-doc.ts");
      process.exit(1);
    }
  } else {
    writeFileSync(out, page);
    console.log(`make-errors-doc: ${out}`);
  }
}
