/**
 * The data channel (src/cli/args.ts keepStdoutForData/printJson) writes a whole document into a
 * pipe whose reader is slow: on the H200 a `check --json` document of 150 KB reached its reader
 * cut at the pipe's 64 KiB (a non-blocking write taking part of it), with exit 0.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

test("a 1 MiB document reaches a reader that starts late, whole", async () => {
  const size = 1 << 20;
  const p = Bun.spawn([process.execPath, join(import.meta.dir, "data-channel-child.ts"), String(size)], { stdout: "pipe", stderr: "pipe" });
  await Bun.sleep(500); // the child fills the pipe and must wait for us
  const out = await new Response(p.stdout).text();
  expect(await p.exited).toBe(0);
  const doc = JSON.parse(out);
  expect(doc.error.message.length).toBe(size);
});
