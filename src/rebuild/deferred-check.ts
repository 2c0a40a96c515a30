/**
 * A Frontend.beforeBuild's deferred check (CUDA: that a slice stamped with its TU's hash is
 * kerncap's), as ./rebuilder.ts runs it beside a fast build: once its compiler runs, before
 * build.sh starts. Run at most once; its answer (or its error) kept for every later question.
 */
import { mark } from "../util/marks.ts";

export class DeferredCheck {
  private outcome?: { changed: boolean } | { error: unknown };

  /** `run`: the frontend's check (whether it changed a source); none: nothing to check. */
  constructor(private readonly run: (() => boolean) | undefined) {}

  /**
   * Whether the check changed a source (run now if it has not run).
   * @throws what the check threw, each time asked
   */
  changed(): boolean {
    if (!this.outcome) {
      try {
        this.outcome = { changed: this.run?.() ?? false };
      } catch (e) {
        this.outcome = { error: e };
      }
      if (this.run) mark(`the deferred check ended (${"error" in this.outcome ? "failed" : this.outcome.changed ? "a source changed" : "nothing changed"})`);
    }
    if ("error" in this.outcome) throw this.outcome.error;
    return this.outcome.changed;
  }

  /**
   * Run the check where nothing may throw (a build's onCompile): a source it changed stops the
   * fast build (`fast`); an error stops it and build.sh (`full`), and changed() throws it later.
   */
  settle(fast: AbortController, full?: AbortController): void {
    try {
      if (this.changed()) fast.abort();
    } catch {
      fast.abort();
      full?.abort();
    }
  }
}
