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

test("a kernel's printf (fd 1: libc's buffer, an inherited fd) reaches stderr with its controls escaped, never stdout or a terminal raw (adversary 60)", async () => {
  // a TMPDIR no private folder can be made in: the output goes to a memfd all the same (it once went to stderr raw)
  for (const [mode, env] of [["exit"], ["wait"], ["exit", { ...process.env, TMPDIR: "/proc/self/no-such-folder" }]] as const) {
    const p = Bun.spawn([process.execPath, join(import.meta.dir, "device-output-child.ts"), mode], { stdout: "pipe", stderr: "pipe", env });
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    expect(await p.exited).toBe(0);
    expect(out).toBe("the verdict\n");
    for (const what of ["buffered", "inherited"]) expect(err, mode).toContain(`${what} \\x1b]52;c;ZWNobyBQV05FRA==\\x07\\x1b[2Jthread 0 says \\u202eevil\n`);
    expect(err).not.toMatch(/[\x1b\x07\u202e]/);
  }
});
