/**
 * The frontend registry (src/frontends/index.ts): a new frontend is one folder and one
 * registration. The toy frontend (test/frontends/toy/) is registered in-process and goes through
 * every path that is derived from the registry: the names the raw capture and the manifest schema
 * accept, `kerncap run`'s options and their parsed object, the capture's enrichment with its
 * templates, and the one rebuild policy (src/rebuild/rebuilder.ts) with its fast build, for
 * validate and for the watch. And nothing outside src/frontends/ switches on a frontend's name.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { parseRaw } from "../../src/capture/raw.ts";
import { commands } from "../../src/cli/verbs.ts";
import { openCapture } from "../../src/format/capture-dir.ts";
import { jsonSchemaOf } from "../../src/format/documents.ts";
import { captureArgs, captureEnrichment, captureOptions, envVars, frontendOf, frontends, isFrontendName, registerFrontend } from "../../src/frontends/index.ts";
import { PRUNED_DIR, readPrunedCheck, Rebuilder } from "../../src/rebuild/rebuilder.ts";
import { toyCalls, toyFrontend } from "../frontends/toy/index.ts";
import { toySpace } from "../frontends/toy/tune.ts";
import { tempDir, writeRawCapture } from "./fixtures.ts";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { renderedDigests } from "../../src/format/rendered.ts";
import { markReceived } from "../../src/format/received.ts";
import { requireTrustedBuild } from "../../src/format/trust.ts";
import { readWhatRuns } from "../../src/format/what-runs.ts";
import { configParams, tuneCsv } from "../../src/tune/html.ts";
import { tuneCapture } from "../../src/ops/tune.ts";
import { runDoctor } from "../../src/doctor.ts";
import * as v from "valibot";

const SRC = resolve(import.meta.dir, "../../src");
const ROOT = resolve(SRC, "..");

/**
 * What adding a frontend touches (docs/layout.md, "Adding a frontend", lists exactly these): its
 * folder (with its templates, env.ts, tune, run files, doctor checks), the line that registers it,
 * and the manual's rows for what it declares. The toy below is registered with that one line
 * (registerFrontend) from that one folder, and every file of it lies in test/frontends/toy/.
 */
const ADD_A_FRONTEND = [
  "src/frontends/<name>/ (its Frontend object in index.ts, and everything it owns)",
  "templates/<name>/ (its reproducer templates, embedded by its templates.ts)",
  "src/frontends/index.ts (one line: the registry's list)",
  "docs/environment.md (a row per variable of its env.ts)",
];

test("no switch on a frontend's name outside src/frontends/", () => {
  const named = /\bfrontend\s*[!=]==?\s*["'`]|["'`](cuda|triton|hip)["'`]\s*[!=]==?\s*[\w.?]*frontend\b/;
  const hits: string[] = [];
  for (const f of readdirSync(SRC, { recursive: true, encoding: "utf8" })) {
    if (!f.endsWith(".ts") || f.endsWith(".test.ts") || f.startsWith("frontends/")) continue;
    readFileSync(join(SRC, f), "utf8")
      .split("\n")
      .forEach((l, i) => named.test(l) && hits.push(`src/${f}:${i + 1}: ${l.trim()}`));
  }
  expect(named.test('if (m.kernel.frontend === "cuda")') && named.test('"triton" !== m.kernel.frontend')).toBe(true);
  expect(hits).toEqual([]);
});

/**
 * A module's code as the boundary test reads it: comments blanked, and the text of every string
 * blanked unless it is a name (no white space: an identifier, a file name, a variable, a frontend's
 * name), so that prose for people (messages, hints, help) may speak of Triton while code may not.
 */
export function codeOf(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; ) {
    const c = text[i]!;
    const n = text[i + 1];
    if (c === "/" && n === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      continue;
    }
    if (c === "/" && n === "*") {
      const e = text.indexOf("*/", i + 2);
      const end = e < 0 ? text.length : e + 2;
      out += text.slice(i, end).replace(/[^\n]/g, " ");
      i = end;
      continue;
    }
    if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      let body = "";
      const code: string[] = []; // ${…} of a template literal: code
      while (j < text.length && text[j] !== c) {
        if (text[j] === "\\") {
          body += text.slice(j, j + 2);
          j += 2;
        } else if (c === "`" && text[j] === "$" && text[j + 1] === "{") {
          let depth = 1;
          let k = j + 2;
          for (; k < text.length && depth; k++) depth += text[k] === "{" ? 1 : text[k] === "}" ? -1 : 0;
          code.push(codeOf(text.slice(j + 2, k - 1)));
          body += " ";
          j = k;
        } else body += text[j++];
      }
      out += c + (/\s/.test(body) ? body.replace(/[^\n]/g, " ") : body) + code.join(" ") + c;
      i = j + 1;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/**
 * What may still name a concrete frontend outside src/frontends/, file by file, and why. Every
 * other file reaches a frontend through the registry (src/frontends/index.ts) and the Frontend
 * interface only.
 */
const EXPORT_WHY =
  "kerncap export's Triton script (templates/export/repro.py and kcdata.py, the kernel's arguments from the Triton signature, the kerncap.export/1 document's `triton` and `commands.triton` fields) is being extended to Inductor and JAX exports; it moves behind a Frontend hook of its own with them";
const MAY_NAME_A_FRONTEND: Record<string, { why: string; lines?: RegExp }> = {
  "export/export.ts": { why: EXPORT_WHY },
  "export/document.ts": { why: EXPORT_WHY },
  "export/project-names.ts": { why: EXPORT_WHY },
  "export/plan.ts": { why: EXPORT_WHY },
  "export/readme.ts": { why: EXPORT_WHY, lines: /triton: Boolean\(t\)/ },
  "cli/commands/export.ts": { why: EXPORT_WHY, lines: /r\.triton|commands\.triton/ },
  "format/documents.ts": { why: EXPORT_WHY, lines: /^\s*(commands: v\.object\(\{ build|triton: v\.nullable)/ },
};

test("no file outside src/frontends/ names a concrete frontend (imports of its folder, its names in code, its identity)", () => {
  const frontendFolder = /from\s+["'][^"']*\/frontends\/(triton|cuda|hip)\//;
  const hits: string[] = [];
  for (const f of readdirSync(SRC, { recursive: true, encoding: "utf8" })) {
    if (!f.endsWith(".ts") || f.endsWith(".test.ts") || f.endsWith(".d.ts") || f.startsWith("frontends/")) continue;
    const allowed = MAY_NAME_A_FRONTEND[f];
    if (allowed && !allowed.lines) continue;
    const text = readFileSync(join(SRC, f), "utf8");
    const lines = text.split("\n");
    codeOf(text)
      .split("\n")
      .forEach((code, i) => {
        const why = frontendFolder.test(lines[i]!)
          ? "imports a frontend's folder"
          : /triton/i.test(code)
            ? "names Triton"
            : /["'`](triton|hip)["'`]/.test(code)
              ? "names a frontend"
              : /\bfrontend\b[^;]{0,40}["'`]cuda["'`]|["'`]cuda["'`][^;]{0,40}\bfrontend\b/.test(code)
                ? "compares with the CUDA frontend"
                : undefined;
        if (why && !allowed?.lines?.test(lines[i]!)) hits.push(`src/${f}:${i + 1} ${why}: ${lines[i]!.trim().slice(0, 120)}`);
      });
  }
  // the reader itself: prose is blanked, names and code are kept
  expect(codeOf('log("a Triton capture"); x = "triton.jsonl"; // Triton\nf(`${tritonX} is`)')).toBe(
    'log("                "); x = "triton.jsonl"; \nf(`    tritonX`)',
  );
  expect(hits).toEqual([]);
  // and the allow-list holds only what still names one (a file cleaned up leaves it)
  const stale = Object.entries(MAY_NAME_A_FRONTEND)
    .filter(([f, a]) => {
      const text = readFileSync(join(SRC, f), "utf8");
      const lines = text.split("\n");
      return !codeOf(text)
        .split("\n")
        .some((code, i) => /triton/i.test(code) && (!a.lines || a.lines.test(lines[i]!)));
    })
    .map(([f]) => f);
  expect(stale).toEqual([]);
});

test("docs/layout.md lists the files touched to add a frontend; the toy's modules all lie in its one folder", () => {
  const layout = readFileSync(join(ROOT, "docs/layout.md"), "utf8");
  expect(layout.indexOf("## Adding a frontend")).toBeGreaterThan(0);
  const section = layout.slice(layout.indexOf("## Adding a frontend"));
  const listed = [...section.split(/\n## /)[0]!.matchAll(/^- `([^`]+)`(.*)$/gm)].map((m) => `${m[1]}${m[2]}`.trim());
  expect(listed).toEqual(ADD_A_FRONTEND);
  const toy = join(ROOT, "test/frontends/toy");
  for (const f of readdirSync(toy).filter((n) => n.endsWith(".ts"))) {
    for (const m of readFileSync(join(toy, f), "utf8").matchAll(/from\s+"(\.[^"]+)"/g)) {
      const to = resolve(toy, m[1]!);
      // inside its folder, or a module of src/ every frontend uses (never another frontend's folder)
      expect(to.startsWith(toy + "/") || (to.startsWith(SRC + "/") && !/\/frontends\/[^/]+\//.test(to.slice(SRC.length))), `${f} imports ${m[1]}`).toBe(true);
    }
  }
});

describe("a frontend registered in-process (test/frontends/toy/)", () => {
  let unregister: () => void;
  const cache = process.env.KERNCAP_CACHE;
  beforeAll(() => {
    process.env.KERNCAP_CACHE = tempDir("kerncap-toy-cache-"); // its templates are not in the checkout's templates/: the cache copy is used
    unregister = registerFrontend(toyFrontend);
  });
  afterAll(() => {
    unregister();
    if (cache === undefined) delete process.env.KERNCAP_CACHE;
    else process.env.KERNCAP_CACHE = cache;
  });

  test("is known by its name: the lookup, the raw capture's schema, the manifest's JSON Schema", () => {
    expect(frontendOf({ kernel: { frontend: "toy" } } as never)).toBe(toyFrontend);
    expect(isFrontendName("toy")).toBe(true);
    const raw = writeRawCapture(tempDir());
    expect(parseRaw({ ...raw, frontend: "toy" }).frontend).toBe("toy");
    expect(() => parseRaw({ ...raw, frontend: "nope" })).toThrow(/frontend.*"nope" is no frontend this kerncap knows/);
    const schema = jsonSchemaOf(
      "manifest",
      frontends().map((f) => f.name),
    ) as { properties: { kernel: { properties: { frontend: { enum: string[] } } } } };
    expect(schema.properties.kernel.properties.frontend.enum).toEqual(["triton", "cuda", "hip", "toy"]);
    expect(() => registerFrontend(toyFrontend)).toThrow("registered already");
    expect(() => registerFrontend({ name: "toy2", validates: false, captureArgs: { "source-root": { type: "string", description: "x" } } })).toThrow(
      "belongs to another frontend",
    );
  });

  test("its options join kerncap run's, and their parsed object is its own", async () => {
    const run = await commands.run();
    const defs = (await (run.args as () => Promise<Record<string, unknown>>)()) as Record<string, { description: string }>;
    expect(defs["toy-level"]!.description).toStartWith("Toy:");
    expect(defs["source-root"]!.description).toStartWith("CUDA:");
    expect(Object.keys(captureArgs())).toContain("toy-level");
    const o = captureOptions({ "toy-level": "2", slice: true });
    expect(o.toy).toEqual({ level: 2 });
    expect(o.cuda).toMatchObject({ slice: true, overlay: false });
    expect(() => captureOptions({ "toy-level": "-1" })).toThrow(expect.objectContaining({ code: "E_USAGE" }));
  });

  /** A toy capture, enriched by every registered frontend with its options (the toy renders its reproducer). */
  async function toyCapture(kernelText?: string) {
    const finalDir = join(tempDir(), "cap");
    const tmp = `${finalDir}.tmp-${process.pid}`;
    const raw = parseRaw({ ...writeRawCapture(tmp), frontend: "toy" });
    const enrich = captureEnrichment({ tmpDir: tmp, raw, pattern: "scale", command: ["./app"] }, captureOptions({ "toy-level": "2" }));
    const m = await finalizeCapture(raw, { tmpDir: tmp, finalDir, force: false, command: ["./app"], match: "scale", ...enrich });
    if (kernelText !== undefined) writeFileSync(join(finalDir, "src", "kernel.txt"), kernelText);
    return { dir: finalDir, m };
  }

  test("a capture of it is enriched with its options and rendered from its embedded templates", async () => {
    const { dir, m } = await toyCapture();
    expect(m.kernel.frontend).toBe("toy");
    expect(m.source).toEqual({ toy: { level: 2 } });
    expect(readFileSync(join(dir, "build.sh"), "utf8")).toContain("The toy reproducer of scale(float*, int) (level 2)");
    expect(openCapture(dir).manifest.kernel.frontend).toBe("toy"); // the written manifest reads back
  });

  test("validate's rebuild policy: build.sh beside its fast build, recorded; then the fast build; a build that differs is refused", async () => {
    const { dir, m } = await toyCapture();
    const rebuild = () => new Rebuilder(dir, m, frontendOf(m), { quiet: true, force: false, fullBuild: false, race: false }).rebuildOnce();
    toyCalls.length = 0;
    const first = await rebuild();
    expect(first).toMatchObject({ builder: "build.sh", module: join(dir, "build", "kernel.bin") });
    expect(toyCalls).toEqual(["beforeBuild", "save", "checkRebuiltModule"]);
    expect(readPrunedCheck(dir)).toMatchObject({ kernel: m.kernel.name, plan: "toy-copy", same: true, reason: null });
    const second = await rebuild();
    expect(second).toMatchObject({ builder: "pruned", module: join(dir, PRUNED_DIR, "fast.bin"), steps: { copyMs: 0 } });
    expect(await new Rebuilder(dir, m, frontendOf(m), { quiet: true, force: false, fullBuild: true }).rebuildOnce()).toMatchObject({ builder: "build.sh" });
    writeFileSync(join(dir, "src", "kernel.txt"), "BAD_LAYOUT\n");
    await expect(rebuild()).rejects.toMatchObject({ code: "E_PARAM_LAYOUT" }); // the module check, before anything launches it

    const other = await toyCapture("TOY_FAST_DIFFERS\n");
    const r = new Rebuilder(other.dir, other.m, frontendOf(other.m), { quiet: true, force: false, fullBuild: false, race: false });
    expect((await r.rebuildOnce()).builder).toBe("build.sh");
    expect(readPrunedCheck(other.dir)).toMatchObject({ same: false, reason: expect.stringContaining("the bytes differ") });
    expect((await r.rebuildOnce()).builder).toBe("build.sh");
  });

  test("the watch's rebuild policy: build.sh until the check beside it concludes, then the fast build; its work folder goes at close", async () => {
    const { dir, m } = await toyCapture();
    const r = new Rebuilder(dir, m, frontendOf(m), { quiet: true, force: false, fullBuild: false, watch: true });
    const first = await r.rebuildSave();
    expect(first.builder).toBe("build.sh");
    expect(r.wantsCheck(first)).toBe(true);
    await r.checkBeside(first, new AbortController().signal);
    const save = await r.rebuildSave();
    expect(save.builder).toBe("pruned");
    expect(r.wantsCheck(save)).toBe(false);
    expect(dirname(save.module)).not.toStartWith(dir); // a temporary folder, not build/pruned
    expect(existsSync(save.module)).toBe(true);
    r.close();
    expect(existsSync(dirname(save.module))).toBe(false);
    expect(frontendOf(m).generatedSources?.(m)).toEqual(["generated.txt"]);
  });

  test("its own variable: listed with the core's, read through its getter, never declared twice", () => {
    expect(envVars().KERNCAP_TOY_LEVEL?.meaning).toContain("toy reproducer's level");
    expect(envVars().KERNCAP_CACHE).toBeDefined();
    const was = process.env.KERNCAP_TOY_LEVEL;
    process.env.KERNCAP_TOY_LEVEL = "3";
    try {
      expect(captureOptions({}).toy).toEqual({ level: 3 });
      expect(captureOptions({ "toy-level": "2" }).toy).toEqual({ level: 2 }); // the option wins
    } finally {
      if (was === undefined) delete process.env.KERNCAP_TOY_LEVEL;
      else process.env.KERNCAP_TOY_LEVEL = was;
    }
    expect(() =>
      registerFrontend({ name: "toy3", validates: false, env: { KERNCAP_TOY_LEVEL: { readers: ["kerncap"], setBy: "user", meaning: "x" } } }),
    ).toThrow("KERNCAP_TOY_LEVEL is declared already");
    expect(() => registerFrontend({ name: "toy4", validates: false, env: { KERNCAP_CACHE: { readers: ["kerncap"], setBy: "user", meaning: "x" } } })).toThrow(
      "KERNCAP_CACHE is declared already",
    );
  });

  test("its own trusted file: a received capture's recipe.txt is shown, hashed and held to its digest; a confined build holds it to its rendered bytes", async () => {
    const { dir, m } = await toyCapture();
    expect(readFileSync(join(dir, "recipe.txt"), "utf8")).toContain("build.sh reads its commands from here");
    expect(renderedDigests(dir).map((d) => d.path)).toEqual(["build.sh", "recipe.txt"]);
    expect(readWhatRuns(dir, "toy")!.files.map((f) => f.name)).toEqual(["build.sh", "recipe.txt"]);
    markReceived(dir, "toy.zip");
    let shown = "";
    try {
      requireTrustedBuild(dir, m, false, { inMessage: true });
    } catch (e) {
      shown = (e as Error).message;
      expect(e).toMatchObject({ code: "E_UNTRUSTED" });
    }
    expect(shown).toContain("recipe.txt");
    expect(shown).toContain("build.sh reads its commands from here");
    const digest = /sha256 ([0-9a-f]{64});/.exec(shown)![1]!;
    writeFileSync(join(dir, "recipe.txt"), 'TOY_SUFFIX="$(id)"\n'); // the sender's change after the user read it
    expect(() => requireTrustedBuild(dir, m, digest, { remember: false })).toThrow(expect.objectContaining({ code: "E_TRUST_CHANGED" }));
  });

  test("its own tune space, reached through kerncap tune's dispatch; its configs read by the report", async () => {
    const { dir, m } = await toyCapture(undefined);
    const base = { configs: ["LEVEL=1,2,3"], defines: [], nvccFlags: [], iters: 5, flushL2: false };
    const r = await tuneCapture(dir, base);
    expect(r.frontend).toBe("toy");
    expect(r.rows.map((x) => [x.label, x.captured, x.verdict])).toEqual([
      ["LEVEL=1", true, "match"],
      ["LEVEL=2", false, "match"],
      ["LEVEL=3", false, "match"],
    ]);
    expect(r.winner?.label).toBe("LEVEL=1");
    expect(r.paste).toBe("LEVEL=1");
    expect(configParams(r.rows[1]!.config)).toEqual({ LEVEL: "2" });
    expect(tuneCsv(r).split("\r\n")[0]).toBe("config,captured,LEVEL,verdict,median_us,speedup,registers,error");
    expect(v.safeParse(DOCUMENTS.tune, { schema: "kerncap.tune/1", ...r }).success).toBe(true);
    await expect(tuneCapture(dir, { ...base, defines: ["X=1"] })).rejects.toMatchObject({
      code: "E_USAGE",
      message: expect.stringContaining("not options of a toy capture's tune"),
    });
    expect(() => toySpace(["BLOCK=1"])).toThrow(expect.objectContaining({ code: "E_USAGE" }));
    expect(m.kernel.frontend).toBe("toy");
  });

  test("its own doctor check joins kerncap doctor's", async () => {
    const d = await runDoctor({ capture: false });
    expect(d.checks.find((c) => c.id === "toy")).toEqual({ id: "toy", status: "ok", detail: "the toy needs nothing of this machine" });
    expect(d.checks.find((c) => c.id === "python")).toBeDefined(); // Triton's, from its folder
  });
});
