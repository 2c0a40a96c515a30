/**
 * src/cli/commands/eval.ts and the help of the verbs that take several folders: an edited copy of
 * a capture given as a candidate is taken as an input, and said so with the DIR/src that makes it
 * a candidate; eval's USAGE line names what it takes; each --runs says the floor it enforces.
 */
import { expect, test } from "bun:test";
import { cpSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { splitPositionals } from "../../../../src/cli/commands/eval.ts";
import { runCli } from "../../../../src/cli/main.ts";
import { captureWithSource, output, tempDir } from "../../fixtures.ts";

test("kerncap eval cap cap-good: cap-good is named as an input, with cap-good/src to evaluate it; an edited copy before candidates is warned of", async () => {
  const cap = await captureWithSource();
  const good = join(cap, "../cap-good");
  cpSync(cap, good, { recursive: true });
  writeFileSync(join(good, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] = 1; }\n");
  let e: any;
  try {
    splitPositionals([cap, good]);
  } catch (x) {
    e = x;
  }
  expect(e.code).toBe("E_USAGE");
  expect(e.message).toBe(`no candidates given: ${good} is a capture folder, taken as an input (the leading capture folders are the inputs)`);
  expect(e.hint).toContain(`give its src/ folder: kerncap eval ${cap} ${join(good, "src")}`);
  expect(() => splitPositionals([cap])).toThrow(/^no candidates given$/);
  const d = tempDir();
  writeFileSync(join(d, "k.cu"), "x");
  const warned = await output(() => splitPositionals([cap, good, join(d, "k.cu")]));
  const said = `${good} is a capture folder, taken as an input, and its src/ differs from ${cap}'s: to evaluate its sources give ${join(good, "src")}`;
  expect(warned.value).toEqual({ dirs: [cap, good], candidates: [join(d, "k.cu")], warnings: [said] }); // the eval document's warnings too
  expect(warned.err).toContain(
    `${good} is a capture folder, taken as an input, and its src/ differs from ${cap}'s: to evaluate its sources give ${join(good, "src")}`,
  );
  // a second capture of the same sources (another launch): an input, nothing said
  const same = join(cap, "../cap-same");
  cpSync(cap, same, { recursive: true });
  expect((await output(() => splitPositionals([cap, same, join(d, "k.cu")]))).err).not.toContain("taken as an input");
});

test("eval's USAGE line names its inputs and candidates (and check's its folders); each --runs says the floor it enforces", async () => {
  const help = async (verb: string) => (await output(() => runCli([verb, "--help"]))).out;
  expect(await help("eval")).toContain("USAGE kerncap eval [OPTIONS] DIR… CANDIDATE… (--merge: FILE…)");
  expect(await help("check")).toContain("USAGE kerncap check [OPTIONS] DIR… (--merge: FILE…)");
  expect(await help("replay")).toMatch(/--runs[^\n]*at least 1\)/);
  expect(await help("check")).toMatch(/--runs[^\n]*at least 1\)/);
  expect(await help("eval")).toMatch(/--runs[^\n]*at least 2:/);
  const cap = await captureWithSource();
  const replay = await output(() => runCli(["replay", cap, "--runs", "0"]));
  expect(replay.value).toBe(2);
  expect(replay.err).toContain("--runs must be a whole number from 1 to 1000");
});
