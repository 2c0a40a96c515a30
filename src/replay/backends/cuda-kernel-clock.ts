/**
 * The CUDA backend's kernel clock (KERNCAP_TIMING clock=cupti, src/replay/timing-setup.ts): each
 * timed launch's duration from the GPU's own start and end timestamps of the kernel, as CUPTI's
 * kernel activity records give them (src/native/kernel-timer.ts; what nsys reports, and close to
 * ncu's gpu__time_duration), instead of a CUDA event pair around the launch. Measured on the H200:
 * an empty kernel takes 2.69 µs by events after the spin, 1.31 µs by ncu: the pair adds about
 * 1.4 µs, which puts tiny kernels far from ncu.
 *
 * Each timed launch is tagged (kc_timer_mark) so that its record is told apart from the spin and
 * scan kernels around it: the library keeps the correlation id of each tagged launch and joins the
 * kernel records on it. The event pair is still recorded: a launch whose record does not come
 * (CUPTI dropped it) is timed by it, and counted.
 *
 * Never under another CUPTI client: an Nsight tool or compute-sanitizer that launched kerncap
 * (src/native/libcupti-search.ts launchingTool), any CUDA_INJECTION64_PATH, or CUPTI's own refusal
 * (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) make openCuptiClock say why, and the caller times
 * with events.
 */
import { isKerncapError } from "../../errors.ts";
import { findCupti, launchingTool } from "../../native/libcupti-search.ts";
import { startKernelTimer, type KernelTimer, type TimerRecord } from "../../native/kernel-timer.ts";

/**
 * The duration (µs) of the launch tagged `tag` among `records`, or undefined when none of them is
 * its record or its timestamps are not filled (a forced flush may hand over a record whose kernel
 * had not ended: start or end 0).
 */
export function durationOf(records: readonly TimerRecord[], tag: bigint): number | undefined {
  const r = records.find((x) => x.tag === tag);
  if (!r || r.startNs === 0n || r.endNs === 0n || r.endNs < r.startNs) return undefined;
  return Number(r.endNs - r.startNs) / 1000;
}

/** Timed launches on the CUPTI clock: tag a launch, then (once it completed) take its duration. */
export class CuptiClock {
  private seq = 0n;
  private pending: TimerRecord[] = [];
  /** Launches taken, and those of them whose record never came (timed by the event pair). */
  taken = 0;
  missed = 0;

  constructor(private readonly timer: Pick<KernelTimer, "mark" | "flush" | "read" | "stop" | "lost">) {}

  /** Queue `launch` under a new tag; @returns the tag for take() */
  tagged(launch: () => void): bigint {
    const tag = ++this.seq;
    this.timer.mark(Number(tag));
    try {
      launch();
    } finally {
      this.timer.mark(0);
    }
    return tag;
  }

  /**
   * The duration (µs) of the launch tagged `tag`, which has completed (the caller synchronized):
   * the records flushed (a forced flush when the plain one did not bring it), or `fallbackUs` (the
   * event pair's time) when its record never comes. Records of earlier tags are dropped.
   */
  take(tag: bigint, fallbackUs: number): number {
    this.taken++;
    let us: number | undefined;
    for (const forced of [false, true]) {
      this.timer.flush(forced);
      this.pending.push(...this.timer.read());
      us = durationOf(this.pending, tag);
      if (us !== undefined) break;
    }
    this.pending = this.pending.filter((r) => r.tag > tag);
    if (us !== undefined) return us;
    this.missed++;
    return fallbackUs;
  }

  /** The timing method's words for this clock (the launches that fell back counted). */
  describe(): string {
    const lost = this.missed ? ` (${this.missed} of ${this.taken} launches had no record: timed by CUDA events)` : "";
    return `the GPU's own start and end of each kernel (CUPTI kernel activity records, as nsys; CUDA events only where a record is missing)${lost}`;
  }

  stop(): void {
    this.timer.stop();
  }
}

/**
 * Start the CUPTI clock in this process, unless another CUPTI client is there or CUPTI refuses.
 * @returns the clock, or why not (one line: the caller times with events and says so)
 */
export function openCuptiClock(
  env: Record<string, string | undefined> = process.env,
  start: (cuptiPath: string) => ReturnType<typeof startKernelTimer> = startKernelTimer,
): { clock: CuptiClock } | { why: string } {
  const tool = launchingTool(env);
  if (tool) return { why: `${tool} runs this process and holds CUPTI` };
  if (env.CUDA_INJECTION64_PATH)
    return { why: `a CUDA tool is injected into this process (CUDA_INJECTION64_PATH=${env.CUDA_INJECTION64_PATH}) and may hold CUPTI` };
  let path: string;
  try {
    path = findCupti(env);
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { why: e.message.split("\n")[0]! };
  }
  const r = start(path);
  if ("why" in r) return { why: r.why };
  return { clock: new CuptiClock(r.timer) };
}
