/** Adversary 59: where a user's --trust seals a copy as theirs (src/format/trust.ts adoptOwnCopy), and a watch held to the folder it started on (src/rebuild/watch-guard.ts). */
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { appendFileSync, chmodSync, cpSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { acceptJudging } from "../../../src/format/judge-accepted.ts";
import { join } from "node:path";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { notSealedHere } from "../../../src/format/made-here.ts";
import { requireTrustedBuild } from "../../../src/format/trust.ts";
import { writeDemo } from "../../../src/capture/demo.ts";
import { watchGuard } from "../../../src/rebuild/watch-guard.ts";
import { kerncapErrorOf, stderrOf, tempDir } from "../fixtures.ts";

test("--trust seals a copy of the user's own only where a seal can stand for it: not with a build.sh of its own (it runs files under src/ the seal does not cover), not with judging settings never accepted, never in check", async () => {
  const root = tempDir();
  const dir = join(root, "cap");
  writeDemo(dir, false);
  const custom = join(root, "custom");
  cpSync(dir, custom, { recursive: true });
  appendFileSync(join(custom, "build.sh"), '. "$here/src/tuning.inc" 2>/dev/null || true\n');
  const m = readManifest(custom);
  const digest = (
    (await kerncapErrorOf(() => stderrOf(() => requireTrustedBuild(custom, m, false)).then((r) => r.value))).details as { trust: { digest: string } }
  ).trust.digest;
  await stderrOf(() => requireTrustedBuild(custom, m, digest));
  expect(notSealedHere(custom)).toBeDefined();
  const judged = join(root, "judged");
  cpSync(dir, judged, { recursive: true });
  writeFileSync(join(judged, "kerncap-judge.json"), '{"schema":"kerncap.judge/1","settings":{"atol":1e30},"sha256":"x"}\n');
  await stderrOf(() => requireTrustedBuild(judged, readManifest(judged), true));
  expect(notSealedHere(judged)).toBeDefined();
  // once the settings are accepted as they are, the same --trust seals it (nu83 #1: it stayed received, asking for the acceptance given)
  acceptJudging(
    judged,
    createHash("sha256")
      .update(readFileSync(join(judged, "kerncap-judge.json")))
      .digest("hex"),
  );
  const sealed = await stderrOf(() => requireTrustedBuild(judged, readManifest(judged), true));
  expect(notSealedHere(judged)).toBeUndefined();
  expect(sealed.err).toContain("is sealed as your own capture");
  const checked = join(root, "checked");
  cpSync(dir, checked, { recursive: true });
  await stderrOf(() => requireTrustedBuild(checked, readManifest(checked), true, { adopt: false }));
  expect(notSealedHere(checked)).toBeDefined();
});

test("a watch's guard: the folder it started on, as trusted; another folder put at the name, or a capture made here that others may write now, ends the watch before any build", async () => {
  const root = tempDir();
  const dir = join(root, "cap");
  writeDemo(dir, false);
  const m = readManifest(dir);
  const guard = watchGuard(dir, m);
  guard(); // as it started
  appendFileSync(join(dir, "src/saxpy.cu"), "// an edit\n");
  guard(); // a source edit is what a watch is for
  chmodSync(join(dir, "build.sh"), 0o777); // others may write it now: received
  const laid = await kerncapErrorOf(() => guard());
  expect(laid.code).toBe("E_UNTRUSTED");
  expect(laid.message).toContain("counts as received now");
  const other = join(root, "other");
  writeDemo(other, false);
  const guard2 = watchGuard(other, readManifest(other));
  renameSync(other, join(root, "gone"));
  writeDemo(other, false);
  const replaced = await kerncapErrorOf(() => guard2());
  expect(replaced.code).toBe("E_UNSAFE_PATH");
  expect(replaced.message).toContain("another folder is at the capture's name now");
});
