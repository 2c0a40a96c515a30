// The count-and-noun helper every message uses (src/util/format.ts plural): "launchs" reached the
// GPU suite once (the NVTX selection's note), so the English -es rule is kept by a test.
import { expect, test } from "bun:test";
import { plural } from "../../src/util/format.ts";

test("plural: the count and the noun, -es after s, x, z, ch, sh; an irregular plural when given", () => {
  expect(plural(1, "launch")).toBe("1 launch");
  expect(plural(5, "launch")).toBe("5 launches");
  expect(plural(2, "pass")).toBe("2 passes");
  expect(plural(0, "region")).toBe("0 regions");
  expect(plural(3, "index", "indices")).toBe("3 indices");
  expect(plural(2, "patch")).toBe("2 patches");
});
