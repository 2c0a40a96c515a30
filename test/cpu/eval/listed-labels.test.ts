// A --candidate-list is one candidate per label (src/eval/candidates.ts parseCandidates): two labels that name one
// path, or one content, each keep their label and their own records (a new user's finding: the second label was lost
// and the first's record given twice).
import { expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listedCandidates, parseCandidates } from "../../../src/eval/candidates.ts";
import { tempDir } from "../fixtures.ts";

test("two labels of one spec, and one spec given twice on the command line", () => {
  const t = tempDir("kerncap-listed-");
  const tree = join(t, "cands", "ok", "src");
  mkdirSync(tree, { recursive: true });
  writeFileSync(join(tree, "saxpy.cu"), "__global__ void saxpy() {}\n");
  const list = join(t, "list.json");
  writeFileSync(
    list,
    JSON.stringify({
      candidates: [
        { label: "gen1-a", spec: join(t, "cands/ok") },
        { label: "gen1-b", spec: join(t, "cands/ok") },
        { label: "gen1-c", spec: join(t, "cands/ok") },
      ],
    }),
  );
  const cs = parseCandidates(listedCandidates(list));
  expect(cs.map((c) => c.label)).toEqual(["gen1-a", "gen1-b", "gen1-c"]);
  expect(new Set(cs.map((c) => c.id)).size).toBe(3);
  // the content is one: the identities differ by label only
  expect(new Set(cs.map((c) => c.id.slice(c.id.indexOf("@")))).size).toBe(1);
  // a path given twice on the command line is one candidate (evaluated once)
  expect(parseCandidates([join(t, "cands/ok"), join(t, "cands/ok")])).toHaveLength(1);
});
