/** src/format/received.ts markReceived: what unpack leaves of a received capture's identity. */
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hostIdentity, markReceived, receivedBecause } from "../../../src/format/received.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { makeCapture, tempDir } from "../fixtures.ts";

test("an unpacked manifest carries no machine id (a hand-made archive naming this machine's: a copy without the mark stays received) (trial 19)", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const p = join(dir, "kerncap.json");
  const m = JSON.parse(readFileSync(p, "utf8"));
  m.host = hostIdentity(); // the sender wrote this machine's id by hand
  writeFileSync(p, JSON.stringify(m));
  markReceived(dir, "sent.zip");
  expect(JSON.parse(readFileSync(p, "utf8")).host).toEqual({ name: m.host.name, machineId: null });
  // the folder copied without the mark: still received (no machine id is this machine's)
  const copy = join(tempDir(), "copy");
  await makeCapture(copy);
  writeFileSync(join(copy, "kerncap.json"), readFileSync(p));
  expect(receivedBecause(copy, readManifest(copy))).toBeDefined();
});
