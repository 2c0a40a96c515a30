/**
 * A SIGHUP the process was started with ignored stays ignored (src/process-group.ts
 * INHERITED_IGNORED): `nohup kerncap run …` outlives its terminal's SIGHUP as nohup promises,
 * where kerncap's handler had turned the hangup into a stop (exit 129). An ignored SIGINT is still
 * a stop (a script's kill -INT of its background kerncap). The child is
 * test/fixtures/stop-signals-child.ts, started by the real `nohup`, a shell that ignores SIGINT, and neither.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { constants } from "node:os";
import { ignoredIn } from "../../src/process-group.ts";

const CHILD = join(import.meta.dir, "..", "fixtures", "stop-signals-child.ts");

/** Start the child (under `prefix`), send it `sig` once ready, and return what it recorded. */
async function stopSeen(prefix: string[], sig: NodeJS.Signals): Promise<{ seen: string; code: number | null }> {
  const p = Bun.spawn([...prefix, process.execPath, CHILD], { stdout: "pipe", stderr: "pipe" });
  const reader = p.stdout.getReader();
  let out = "";
  while (!out.includes("ready\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  p.kill(sig);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  const code = await p.exited;
  return { seen: out.replace("ready\n", "").trim(), code };
}

test("SigIgn's mask names the ignored stop signals (bit n-1 for signal n)", () => {
  const bit = (n: NodeJS.Signals) => 1n << BigInt(constants.signals[n] - 1);
  const mask = (bit("SIGHUP") | bit("SIGPIPE")).toString(16).padStart(16, "0");
  expect([...ignoredIn(mask, ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"])]).toEqual(["SIGHUP"]);
  expect([...ignoredIn("0000000000000000", ["SIGINT", "SIGHUP"])]).toEqual([]);
  expect([...ignoredIn("zz", ["SIGINT", "SIGHUP"])]).toEqual([]);
});

test("under nohup a SIGHUP is left ignored (no stop recorded); without nohup it stops the verb", async () => {
  const plain = await stopSeen([], "SIGHUP");
  expect(plain).toEqual({ seen: "SIGHUP", code: 0 });
  const nohup = await stopSeen(["nohup"], "SIGHUP");
  expect(nohup).toEqual({ seen: "none", code: 0 });
  // SIGTERM was not ignored at the start: still a stop under nohup
  expect(await stopSeen(["nohup"], "SIGTERM")).toEqual({ seen: "SIGTERM", code: 0 });
  // SIGINT ignored by the shell that started it (a background job's): still a stop
  expect(await stopSeen(["bash", "-c", `trap '' INT; exec "$@"`, "sh"], "SIGINT")).toEqual({ seen: "SIGINT", code: 0 });
}, 20_000);
