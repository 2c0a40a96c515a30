// The count-and-noun helper every message uses (src/util/format.ts plural): "launchs" reached the
// GPU suite once (the NVTX selection's note), so the English -es rule is kept by a test.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { plural } from "../../src/util/format.ts";

test("plural: the count and the noun, -es after s, x, z, ch, sh; an irregular plural when given", () => {
  expect(plural(1, "launch")).toBe("1 launch");
  expect(plural(5, "launch")).toBe("5 launches");
  expect(plural(2, "pass")).toBe("2 passes");
  expect(plural(0, "region")).toBe("0 regions");
  expect(plural(3, "index", "indices")).toBe("3 indices");
  expect(plural(2, "patch")).toBe("2 patches");
});

test("the docs show the plurals the helper makes: no 'launchs' (found by a new user in the walkthrough's NVTX output)", () => {
  const root = join(import.meta.dir, "../..");
  const docs = [
    join(root, "README.md"),
    ...readdirSync(join(root, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => join(root, "docs", f)),
  ];
  // a count, then a noun ending in x, z, ch or sh with a bare -s added: what plural() never writes; a quoted one is a quote (benchmarks.md's history)
  const bad = docs.flatMap((f) =>
    [...readFileSync(f, "utf8").matchAll(/(?<!")\b\d+ (\w*(?:ch|sh|x|z))s\b/g)].map((m) => `${f.slice(root.length + 1)}: ${m[0]}`),
  );
  expect(bad).toEqual([]);
});
