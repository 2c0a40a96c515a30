/**
 * replay/validate --json: whatever else writes to fd 1 (a kernel's device printf, flushed by the
 * CUDA driver) goes to stderr, the JSON document alone to stdout (src/cli/args.ts keepStdoutForData).
 * Seen on the H200: `validate --json` of a kernel with printf printed its lines before the document.
 */
import { expect, test } from "bun:test";
import { resolve } from "node:path";

test("after keepStdoutForData, fd 1 writes land on stderr and the document on stdout", async () => {
  const args = resolve(import.meta.dir, "../../src/cli/args.ts");
  const script = `import { writeSync } from "node:fs";
import { keepStdoutForData, printJson } from ${JSON.stringify(args)};
keepStdoutForData();
writeSync(1, "checked_copy n=4096 (device printf)\\n");
printJson("replay", { verdict: "match" });`;
  const p = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  expect(code, err).toBe(0);
  expect(JSON.parse(out)).toMatchObject({ schema: "kerncap.replay/1", verdict: "match" });
  expect(err).toContain("checked_copy n=4096 (device printf)");
});

test("a child started with dataStdio() (the no-ASLR replay retry) writes its document to the real stdout", async () => {
  // seen on the H200: the retried replay inherited fd 1 after the redirect; its --json document went to stderr
  const args = resolve(import.meta.dir, "../../src/cli/args.ts");
  const script = `import { keepStdoutForData, dataStdio } from ${JSON.stringify(args)};
keepStdoutForData();
const p = Bun.spawn(["sh", "-c", "echo '{\\"verdict\\":\\"match\\"}'"], { stdio: ["inherit", dataStdio(), "inherit"] });
process.exit(await p.exited);`;
  const p = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  expect(code, err).toBe(0);
  expect(JSON.parse(out)).toEqual({ verdict: "match" });
  expect(err).not.toContain("verdict");
});
