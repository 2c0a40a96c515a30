/**
 * The manual page docs/kerncap.1 (src/cli/man.ts, written by scripts/make-man.ts): current with
 * the verb table (a verb's new option without `bun scripts/make-man.ts` fails here), every verb and
 * visible option in it, nothing internal, and, where groff is installed, rendered without a warning.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { manPage, roff } from "../../src/cli/man.ts";
import { commands } from "../../src/cli/verbs.ts";
import { TOOL_VERSION } from "../../src/version.ts";

const ROOT = resolve(import.meta.dir, "../..");

test("docs/kerncap.1 is what the verb table makes now (run `node_modules/.bin/bun scripts/make-man.ts` after changing a verb)", async () => {
  const page = await manPage(commands, TOOL_VERSION);
  expect(readFileSync(join(ROOT, "docs/kerncap.1"), "utf8")).toBe(page);
  for (const verb of Object.keys(commands)) expect(page, verb).toContain(`.SS \\fB${roff(verb)}\\fR`);
  for (const opt of ["allow\\-version\\-mismatch", "report", "print\\-config", "launch\\-skip"]) expect(page, opt).toContain(`\\fB\\-\\-${opt}\\fR`);
  expect(page).not.toMatch(/\\-\\-worker\\fR/); // check's and eval's protocol option (eval's --workers-per-gpu is for people)
  expect(page).toMatch(/^[\x00-\x7f]*$/); // every other character as \[uXXXX]
  const check = Bun.spawnSync([process.execPath, join(ROOT, "scripts/make-man.ts"), "--check"], { stderr: "pipe" });
  expect(check.exitCode, check.stderr.toString()).toBe(0);
});

test("roff escaping: a leading dot or quote cannot become a request, backslashes and dashes are literal", () => {
  expect(roff(".SH x")).toBe("\\&.SH x");
  expect(roff("'x")).toBe("\\&'x");
  expect(roff("a\\b -c")).toBe("a\\eb \\-c");
  expect(roff("12 µs × 2")).toBe("12 \\[u00B5]s \\[u00D7] 2");
});

test.skipIf(!Bun.which("groff"))("groff renders it without a warning", () => {
  const r = Bun.spawnSync(["groff", "-man", "-Tutf8", "-ww", "-z", join(ROOT, "docs/kerncap.1")], { stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  expect(r.stderr.toString()).toBe("");
});

test("docs/*.md name every verb's every option (--NAME, --no-NAME or --[no-]NAME), and verbs.md's table and doctor's description name what a new user missed there", async () => {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => readFileSync(join(ROOT, "docs", f), "utf8"))
    .join("\n");
  const missing: string[] = [];
  // and verbs.md's table row of each verb names each of its options, or an alias (nu #10: list --nvtx, inspect --offset … were only in the prose)
  const verbs = readFileSync(join(ROOT, "docs/verbs.md"), "utf8");
  const row = (verb: string) => verbs.split("\n").find((l) => l.startsWith(`| \`${verb} `) || l.startsWith(`| \`${verb}\``))!;
  const notInRow: string[] = [];
  const common = new Set(["json", "verbose", "verify"]); // every verb's, or replay's default, said once above the table
  for (const [verb, load] of Object.entries(commands)) {
    const cmd = await (load as () => Promise<{ args?: unknown }>)();
    const args = (typeof cmd.args === "function" ? await cmd.args() : await cmd.args) as
      | Record<string, { type?: string; alias?: string | string[] }>
      | undefined;
    for (const [name, a] of Object.entries(args ?? {})) {
      if (a.type === "positional" || name === "worker") continue; // check's and eval's protocol option
      const bare = name.replace(/^no-/, "");
      const said = (text: string, w: string) => new RegExp(`${w.replace(/[[\]]/g, "\\$&")}\\b`).test(text);
      if (![`--${name}`, `--no-${bare}`, `--[no-]${bare}`].some((w) => said(docs, w))) missing.push(`${verb} --${name}`);
      const aliases = [a.alias ?? []].flat().map((x) => (x.length === 1 ? `-${x}` : `--${x}`));
      if (!common.has(name) && ![`--${name}`, `--[no-]${bare}`, `--${bare}`, ...aliases].some((w) => said(row(verb) ?? "", w)))
        notInRow.push(`${verb} --${name}`);
    }
  }
  expect(missing).toEqual([]);
  expect(notInRow).toEqual([]);
  expect(row("pack")).toContain("--name NAME");
  expect(row("profile")).toContain("--name NAME");
  for (const o of ["--slower PCT", "--write-baseline FILE", "--results DIR"]) expect(row("check")).toContain(o);
  expect(row("doctor")).toContain("nvcc, ncu,");
  expect(verbs.slice(verbs.indexOf("**`doctor`**")).split("\n\n")[1]).toContain("Nsight Compute (`ncu`");
});
