/**
 * Replay needs every captured VA range free in its own process. The replay process's host
 * mappings (shared libraries, heaps) are placed by ASLR at random in the same 0x7f… area where the
 * driver put the application's allocations, so now and then one of them sits in a captured range:
 * seen once on the H200 node (a 4 GiB span of the structs app, "driver offered 0x7f75…" instead
 * of 0x7f73…) among about 40 replays in one GPU-suite run. With randomization off (setarch -R,
 * util-linux) the libraries sit at fixed addresses at the very top of the address space, clear of
 * the ranges an application's allocations come from, so a second attempt there succeeds where
 * the first collided.
 */
import { arch } from "node:os";
import { aslrRetryChildEnv, aslrRetryDisabled, isAslrRetryChild, whichAbsolute } from "../env.ts";
import { isKerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { selfEnv, thisCommandAgain } from "../util/self-exec.ts";

const SETARCH_ARCH: Record<string, string> = { x64: "x86_64", arm64: "aarch64" };

/** The command prefix that runs a program without address-space randomization (`setarch MACHINE -R`), or undefined where setarch or the machine name is missing. */
export function noAslrPrefix(): string[] | undefined {
  const setarch = whichAbsolute("setarch");
  const machine = SETARCH_ARCH[arch()];
  return setarch && machine ? [setarch, machine, "-R"] : undefined;
}

/**
 * Run `body`; when it fails with E_VA_TAKEN, run this same kerncap command again in a child
 * process without address-space randomization and return the child's exit code (its stdout goes
 * to our data channel, its stderr to ours). The failed attempt released its GPU state (openReplay
 * resets the device context when it fails).
 * @returns body's result, or the child's exit code.
 * @throws what body throws when no retry is possible (already the retry: KERNCAP_ASLR_RETRY=1;
 *   no setarch; KERNCAP_NO_ASLR_RETRY=1), or for any other error.
 */
export async function withAslrRetry(body: () => Promise<number>, stdout: number | "inherit" = "inherit"): Promise<number> {
  try {
    return await body();
  } catch (e) {
    const prefix = noAslrPrefix();
    if (!isKerncapError(e) || e.code !== "E_VA_TAKEN" || isAslrRetryChild() || aslrRetryDisabled() || !prefix) throw e;
    log.warn(`${e.message}; running the command again in a process without address-space randomization (setarch -R)`);
    const p = Bun.spawn([...prefix, ...thisCommandAgain()], { env: aslrRetryChildEnv(selfEnv()), stdio: ["inherit", stdout, "inherit"] });
    // Ctrl-C/SIGTERM sent to this process alone (validate --watch stopped by its parent) reach the
    // command that does the work; its exit code (130, 143) is ours
    const forward = (sig: NodeJS.Signals) => () => p.kill(sig);
    const handlers = (["SIGINT", "SIGTERM"] as const).map((sig) => [sig, forward(sig)] as const);
    for (const [sig, h] of handlers) process.on(sig, h);
    try {
      return await p.exited;
    } finally {
      for (const [sig, h] of handlers) process.off(sig, h);
    }
  }
}
