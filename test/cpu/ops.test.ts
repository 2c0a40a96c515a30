/**
 * The verbs' workflows live in src/ops/, and their gates are applied there once (docs/layout.md):
 * a received capture's build.sh only after --trust (requireTrustedBuild), a confined build only
 * the one kerncap wrote (requireRenderedBuild), --trust remembered (trustChangedBuild), --multiset's
 * regions checked before the GPU (checkMultiset), the no-ASLR retry (withAslrRetry), the rebuild
 * beside the replay (startRebuild). These tests fail when a module outside src/ops/ calls one of
 * them (a second caller that could forget the others), when a verb's command or the check
 * worker goes around its ops function, when an MCP tool that builds is not confined, when kerncap
 * is started again other than through src/util/self-exec.ts, and when an ops function lets a
 * received capture's build run without --trust.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { packCapture, unpackArchive } from "../../src/format/archive.ts";
import { openCapture } from "../../src/format/capture-dir.ts";
import { checkCapture } from "../../src/ops/check.ts";
import { tuneCapture } from "../../src/ops/tune.ts";
import { validateGates } from "../../src/ops/validate.ts";
import { gatedArgv, TOOLS, type ToolName } from "../../src/mcp/tools.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

const SRC = resolve(import.meta.dir, "../../src");
const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
  .map((f) => ({ rel: f, text: readFileSync(join(SRC, f), "utf8") }));

/** A gate or shared step → the modules that define it and the ones outside src/ops/ allowed to call it, with why. */
const GATES: Record<string, { defined: string; allowed?: Record<string, string> }> = {
  requireTrustedBuild: { defined: "format/trust.ts" },
  requireTrustedCopy: { defined: "format/trust.ts" },
  requireRenderedBuild: {
    defined: "format/rendered.ts",
    // the build runner's own check of every confined build, at the moment build.sh starts (defence in depth below the ops gate)
    allowed: { "frontends/build.ts": "the confined build's last check", "frontends/confined-steps.ts": "the confined fast build's own (eval's pruned builds)" },
  },
  trustChangedBuild: { defined: "format/rendered.ts" },
  checkMultiset: { defined: "replay/tolerance-plan.ts" },
  withAslrRetry: { defined: "replay/aslr.ts" },
  startRebuild: { defined: "ops/rebuild-beside.ts" },
};

/** Calls of `name(` in a module's code (comments left out), not its definition. */
function calls(text: string, name: string): number {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  return [...code.matchAll(new RegExp(`(?<![.\\w])${name}\\s*\\(`, "g"))].filter((m) => !/function\s+$/.test(code.slice(Math.max(0, m.index - 20), m.index)))
    .length;
}

describe("the gates are applied in src/ops/ only", () => {
  test("the call finder sees a call and not a definition, a comment or a method of that name", () => {
    expect(
      calls(
        "export function requireTrustedBuild(a) {}\n// requireTrustedBuild(x)\n/* requireTrustedBuild(y) */\nx.requireTrustedBuild(z);",
        "requireTrustedBuild",
      ),
    ).toBe(0);
    expect(calls("  requireTrustedBuild(dir, m, trust);", "requireTrustedBuild")).toBe(1);
    expect(calls("() => withAslrRetry(() => 1)", "withAslrRetry")).toBe(1);
  });

  test("no module outside src/ops/ calls a gate (but where it is defined, and the build runner's own check)", () => {
    const outside: string[] = [];
    for (const [name, g] of Object.entries(GATES)) {
      for (const f of files) {
        if (f.rel.startsWith("ops/") || f.rel === g.defined || g.allowed?.[f.rel]) continue;
        if (calls(f.text, name)) outside.push(`${f.rel} calls ${name}`);
      }
    }
    expect(outside).toEqual([]);
    // and ops does call each of them: the list above names real gates
    for (const name of Object.keys(GATES))
      expect(
        files.filter((f) => f.rel.startsWith("ops/")).some((f) => calls(f.text, name)),
        name,
      ).toBe(true);
  });

  test("each verb's command calls its workflow in src/ops/, and imports none of the gates' modules", () => {
    const verbs = ["validate", "replay", "profile", "tune", "check", "eval"];
    for (const verb of verbs) {
      const text = files.find((f) => f.rel === `cli/commands/${verb}.ts`)!.text;
      expect(text, verb).toContain(`from "../../ops/${verb}.ts"`);
      for (const lower of ["format/trust.ts", "format/rendered.ts", "replay/aslr.ts", "ops/gates.ts", "ops/rebuild-beside.ts"])
        expect(text, `${verb} imports ${lower}`).not.toContain(`"../../${lower}"`);
    }
  });

  test("check's worker checks each capture with the ops workflow (src/ops/check.ts checkWorker, checkCapture)", () => {
    const text = files.find((f) => f.rel === "cli/commands/check.ts")!.text;
    expect(text).toMatch(/import \{ checkWorker \} from "\.\.\/\.\.\/ops\/check\.ts"/);
    expect(text).toMatch(/if \(args\.worker\) \{\s*await checkWorker\(/);
    expect(files.find((f) => f.rel === "ops/check.ts")!.text).toMatch(/serveTasks\([^\n]*checkCapture/);
  });

  test("every MCP tool that builds runs its verb confined, with --trust only under --trust-builds; its verb's command calls ops", () => {
    const minimal: Record<ToolName, Record<string, unknown>> = {
      list: { app: ["app"] },
      run: { app: ["app"] },
      inspect: { dir: "d" },
      replay: { dir: "d" },
      validate: { dir: "d" },
      build: { dir: "d" },
      profile: { dir: "d", build: true },
      tune: { dir: "d" },
      evaluate: { dir: "d", candidates: [] },
      read_file: { dir: "d", path: "p" },
      list_files: { dir: "d" },
      edit_file: { dir: "d", path: "p" },
    };
    expect(Object.keys(minimal).sort()).toEqual(Object.keys(TOOLS).sort()); // a new tool must be listed here
    const builders = new Set(["validate", "profile", "tune", "eval"]);
    for (const [name, t] of Object.entries(TOOLS) as [ToolName, (typeof TOOLS)[ToolName]][]) {
      if (!("argv" in t)) continue;
      const a = minimal[name];
      const plain = gatedArgv(name, a, (t.argv as (x: unknown) => string[])(a), false);
      const trusted = gatedArgv(name, a, (t.argv as (x: unknown) => string[])(a), true);
      const verb = plain[0]!;
      if (builders.has(verb)) {
        expect(plain, name).toContain("--confine");
        expect(plain, name).not.toContain("--trust");
        if (name !== "evaluate") expect(trusted, name).toContain("--trust"); // evaluate's --trust is added beside its candidates (server.ts evaluateTool)
        expect(files.find((f) => f.rel === `cli/commands/${verb}.ts`)!.text, verb).toContain(`from "../../ops/`);
      } else expect(plain, name).not.toContain("--confine");
    }
    // profile without build builds nothing: not confined
    expect(gatedArgv("profile", { dir: "d" }, TOOLS.profile.argv({ dir: "d" }), false)).not.toContain("--confine");
  });

  test("kerncap is started again only through src/util/self-exec.ts", () => {
    const others = files.filter(
      (f) =>
        f.rel !== "util/self-exec.ts" &&
        /process\.execPath|\/\$bunfs|BUN_BE_BUN|process\.argv\[1\]/.test(f.text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")),
    );
    expect(others.map((f) => f.rel)).toEqual([]);
  });
});

describe("a received capture's build runs through no workflow without --trust", () => {
  /** A CUDA capture with a build.sh that marks that it ran, packed and unpacked: received. */
  async function received(root: string): Promise<string> {
    const made = join(root, "made");
    await makeCapture(made);
    mkdirSync(join(made, "src"));
    writeFileSync(join(made, "src/kernel.cu"), "int k() { return 1; }\n");
    writeFileSync(join(made, "build.sh"), `#!/usr/bin/env bash\necho ran >${join(root, "ran")}\n`, { mode: 0o755 });
    const p = await packCapture(made, join(root, "cap.zip"));
    return (await unpackArchive(p.archive, join(root, "got"))).dir;
  }
  const ran = (root: string) => readdirSync(root).includes("ran");
  const quiet = async <T>(f: () => Promise<T> | T): Promise<T> => {
    const w = process.stderr.write;
    process.stderr.write = () => true; // the refusal prints the build.sh it refused
    try {
      return await f();
    } finally {
      process.stderr.write = w;
    }
  };

  test("validate, tune and check's worker refuse it (E_UNTRUSTED; confined: E_NOT_RENDERED) before anything of it runs", async () => {
    const root = tempDir();
    const dir = await received(root);
    const c = openCapture(dir);
    const request = { run: { iters: 1 }, trust: false, confine: false, watch: false, quiet: true, force: false, fullBuild: false, stdout: "inherit" as const };
    expect(() => validateGates(c, request)).toThrow(expect.objectContaining({ code: "E_UNTRUSTED" }));
    // confined (kerncap mcp): a build.sh kerncap did not write is refused first
    expect(() => validateGates(c, { ...request, confine: true })).toThrow(expect.objectContaining({ code: "E_NOT_RENDERED" }));
    await expect(quiet(() => tuneCapture(dir, { configs: [], defines: ["X=1,2"], nvccFlags: [], iters: 20, flushL2: false }))).rejects.toMatchObject({
      code: "E_UNTRUSTED",
    });
    const outcome = await quiet(() =>
      checkCapture({ id: "got", path: dir, kind: "folder" }, { iters: 1, verify: true, rebuild: true, force: false, trust: false, tolerance: {} }),
    );
    expect(outcome).toMatchObject({ outcome: "error", code: "E_UNTRUSTED" });
    expect(ran(root)).toBe(false);
    expect(relative(root, dir)).toBe("got");
  });
});
