/**
 * `kerncap validate DIR`: rebuild the reproducer's (edited) kernel with DIR/build.sh, replay the
 * rebuilt module on the captured memory, compare with the app's after state.
 * The build runs while the replay reserves the captured VAs, creates the CUDA context, verifies
 * the checksums and restores the before state; the module is loaded (after the parameter-layout
 * check, before any launch) once the build is done. So the loop costs about the build plus the
 * launch and compare, not build + context + restore.
 * Exit 0 match, 1 mismatch, 2 build or runtime error.
 */
import { defineCommand } from "citty";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { checkRebuiltModule } from "../../repro/cuda.ts";
import { readManifest } from "../../format/capture-dir.ts";
import { log } from "../../log.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { replayCuda } from "../../replay/engine.ts";
import { dirArg, intArg, jsonArg, printJson, verboseArg } from "../args.ts";
import { describeReplay, toleranceArgs, toleranceOptions } from "./replay.ts";

/**
 * Run DIR/build.sh; it prints the path of the module it built on its last stdout line.
 * @returns { module path, build seconds }
 * @throws KerncapError E_BUILD (exit 2) with the compiler's message.
 */
export async function rebuild(dirArg: string, quiet: boolean): Promise<{ module: string; seconds: number }> {
  const dir = resolve(dirArg); // build.sh runs inside the folder: a relative path would not find it
  const script = join(dir, "build.sh");
  if (!existsSync(script)) {
    throw new KerncapError("E_NO_REPRODUCER", `${dir} has no build.sh: no reproducer project was generated for this capture`, {
      hint: "Capture with the kernel's source available (CUDA: --source-root/--compile-commands; Triton: automatic), or replay the captured module with `kerncap replay`.",
    });
  }
  const t0 = performance.now();
  // its own process group, so that Ctrl-C can stop the compiler under bash too (bash alone would
  // wait for its foreground child before acting on the signal)
  const p = Bun.spawn(["bash", script], { cwd: dir, env: { ...process.env }, stdout: "pipe", stderr: "pipe", detached: true });
  // Ctrl-C: stop the build and say so (exit 130), rather than report its death as a compile error
  let interrupted = false;
  const onInt = () => {
    interrupted = true;
    try {
      process.kill(-p.pid, "SIGINT");
    } catch {
      p.kill("SIGINT");
    }
    setTimeout(() => {
      try {
        process.kill(-p.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }, 2000).unref();
  };
  process.on("SIGINT", onInt);
  let out: string, err: string, code: number;
  try {
    [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  } finally {
    process.off("SIGINT", onInt);
  }
  const seconds = (performance.now() - t0) / 1000;
  if (interrupted || code === 130 || p.signalCode === "SIGINT") {
    throw new KerncapError("E_INTERRUPTED", "interrupted during the rebuild; nothing was replayed", { exitCode: 130 });
  }
  if (code !== 0) {
    throw new KerncapError("E_BUILD", `the reproducer does not build (build.sh exit ${code}):\n${(err || out).trim().split("\n").slice(-30).join("\n")}`, {
      hint: "Fix the compile error in the edited source and run validate again.",
    });
  }
  if (!quiet && err.trim()) log.debug(err.trim());
  const last = out.trim().split("\n").pop() ?? "";
  const module = resolve(dir, last);
  if (!last) throw new KerncapError("E_BUILD", "build.sh printed nothing on stdout: it must print the path of the module it built, last", { hint: "End build.sh with `echo \"$out\"` (the cubin it wrote)." });
  if (!existsSync(module)) {
    throw new KerncapError("E_BUILD", `build.sh named ${module} as the module it built, but there is no such file`, { hint: "Check the output path in build.sh (the -o of the compiler and the path it prints last)." });
  }
  return { module, seconds };
}

export default defineCommand({
  meta: { name: "validate", description: "Rebuild the edited reproducer, replay it on the captured memory, compare with the app" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked one", default: "10" },
    ...toleranceArgs,
    force: { type: "boolean", description: "Rebuild even when the toolchain differs from the capture's (Triton version)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const dir = String(args.dir);
    const m = readManifest(dir);
    if (args.force) process.env.KERNCAP_FORCE = "1"; // read by the reproducer's build (templates/triton/repro.py)
    const iters = intArg("iters", args.iters, 10, 100_000); // options first: no rebuild for a typo
    const tol = toleranceOptions(args);
    // a captured VA range taken by this process's own mappings: once more without ASLR (src/replay/aslr.ts)
    return withAslrRetry(async () => {
      const t0 = performance.now();
      let builtAt = 0;
      const built = rebuild(dir, !args.verbose).then((b) => {
        builtAt = performance.now();
        if (m.kernel.frontend === "cuda") checkRebuiltModule(b.module, m); // parameter layout unchanged? before anything launches (exit 2)
        return b;
      });
      const modulePath = built.then((b) => b.module);
      // both are awaited below; a replay error that comes first must not leave them unhandled
      built.catch(() => {});
      modulePath.catch(() => {});
      let r: Awaited<ReturnType<typeof replayCuda>>;
      try {
        r = await replayCuda(dir, { iters, verify: true, modulePath, kernelName: m.kernel.name, ...tol });
      } catch (e) {
        await built; // a build error is the one to report (the replay may have failed only for lack of a module)
        throw e;
      }
      const b = await built;
      // replaySeconds: what the replay added after the build (module load, launches, compare)
      const replaySeconds = (performance.now() - Math.max(builtAt, t0)) / 1000;
      const res = { ...r, rebuild: { module: b.module, seconds: b.seconds }, replaySeconds, wallSeconds: (performance.now() - t0) / 1000 };
      if (args.json) printJson("validate", res);
      else {
        process.stdout.write(describeReplay(r) + "\n");
        process.stdout.write(`  rebuild ${b.seconds.toFixed(2)} s, then replay ${replaySeconds.toFixed(2)} s (context, restore and checksums ran during the build)\n`);
      }
      return r.verdict === "match" ? 0 : 1;
    });
  },
});
