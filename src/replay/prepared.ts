/**
 * What a replay session holds of one kernel between its steps: the loaded module (Loaded) and the
 * kernel checked and ready to time (Prepared).
 */
import type { ClockState, ReplayModule } from "./backends/interface.ts";
import type { ReplayResult } from "./result.ts";
import type { TimedKernel } from "./timing-setup.ts";

/** A loaded module and how long its wait and load took. */
export interface Loaded {
  mod: ReplayModule;
  modFile: string;
  /** RunOptions.launchOf's answer for a rebuilt module (undefined: the captured block and shared memory). */
  rebuiltLaunch?: { block: [number, number, number]; sharedMemBytes: number };
  moduleWaitSeconds: number;
  /** performance.now() when the load began. */
  t2: number;
  /** What to free with the module (its kept state: ./module-state.ts). */
  release: (() => void)[];
}

/** Unload a module and free what was kept with it. */
export function unloadModule(l: Loaded): void {
  l.mod.unload(); // its globals go with it; the next run loads its own module
  for (const f of l.release) f();
}

/** A kernel checked and ready to time: its launch, the restore before each, and its result given the timed launches (µs). */
export interface Prepared {
  /** The capture faulted in the app: the replay's outcome, nothing to time. */
  fault?: ReplayResult;
  launch: () => void;
  restoreChanged: () => void;
  /** The launch and restore as the timed launches run them (src/replay/timing-setup.ts). */
  timed: TimedKernel;
  finish: (times: number[], interleaved: boolean, clocks: ClockState | null) => ReplayResult;
  /** Check the timed launch just made (of round `round`) against the checked runs; undefined where a timed launch is not checked (a nondeterministic kernel). */
  checkTimed?: (round: number) => void;
}
