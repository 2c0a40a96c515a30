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
import { captureArgs, captureEnrichment, captureOptions, frontendOf, frontends, isFrontendName, registerFrontend } from "../../src/frontends/index.ts";
import { PRUNED_DIR, readPrunedCheck, Rebuilder } from "../../src/rebuild/rebuilder.ts";
import { toyCalls, toyFrontend } from "../frontends/toy/index.ts";
import { tempDir, writeRawCapture } from "./fixtures.ts";

const SRC = resolve(import.meta.dir, "../../src");

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
    const schema = jsonSchemaOf("manifest", frontends().map((f) => f.name)) as { properties: { kernel: { properties: { frontend: { enum: string[] } } } } };
    expect(schema.properties.kernel.properties.frontend.enum).toEqual(["triton", "cuda", "hip", "toy"]);
    expect(() => registerFrontend(toyFrontend)).toThrow("registered already");
    expect(() => registerFrontend({ name: "toy2", validates: false, captureArgs: { "source-root": { type: "string", description: "x" } } })).toThrow("belongs to another frontend");
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
});
