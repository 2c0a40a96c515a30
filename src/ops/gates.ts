/**
 * The gates every workflow of src/ops/ applies before a capture's build or replay runs, named
 * once here: a confined build (kerncap mcp) of a frontend whose build runs the capture's source
 * (Frontend.buildRunsSource) only with --trust; only the build kerncap wrote, or one the user
 * trusted (src/format/rendered.ts requireRenderedBuild); a received capture's build.sh only after
 * --trust (src/format/trust.ts requireTrustedBuild). No module outside src/ops/ calls those
 * (test/cpu/ops.test.ts), so a new caller of a verb's workflow cannot leave one out.
 */
import { KerncapError } from "../errors.ts";
import { shownWord } from "../util/shell-quote.ts";
import type { Manifest } from "../format/manifest.ts";
import { requireRenderedBuild, trustChangedBuild } from "../format/rendered.ts";
import { runsTrustedCopy } from "../format/staged-build.ts";
import { requireTrustedBuild, requireTrustedCopy } from "../format/trust.ts";
import { frontendOf } from "../frontends/index.ts";
import type { BuildGate } from "../rebuild/gate.ts";

export { requireRenderedBuild, requireTrustedBuild, requireTrustedCopy, runsTrustedCopy, trustChangedBuild };
export type { BuildGate };

/** What a confined verb says when it refuses to run a capture's source without trust (the verb's own words). */
export interface SourceRefusal {
  message: string;
  hint: string;
}

/**
 * A confined build (kerncap mcp) of a capture whose frontend's build imports its source under
 * src/ (Triton: code that runs with the user's rights) is refused without trust.
 * @throws KerncapError E_UNTRUSTED
 */
export function refuseUntrustedSource(m: Manifest, o: { confine?: boolean; trust?: boolean | string }, say: () => SourceRefusal): void {
  if (!o.confine || !frontendOf(m).buildRunsSource || o.trust) return;
  const r = say();
  throw new KerncapError("E_UNTRUSTED", r.message, { hint: r.hint });
}

/** The trust gate as a BuildGate (src/rebuild/gate.ts) for a library function that calls it where its build is about to start. */
export function trustGate(dir: string, m: Manifest, trust: boolean | string, o: Parameters<typeof requireTrustedBuild>[3] = {}): BuildGate {
  return () => requireTrustedBuild(dir, m, trust, o);
}

/**
 * This process's `kerncap VERB …` command line as a person types it, without its --trust words
 * (what a trust refusal offers with `--trust=DIGEST` added: the same command, every option kept);
 * undefined where this process runs no such verb (a test, kerncap mcp's server).
 */
export function commandAgain(verb: string): string | undefined {
  const argv = process.argv.slice(2);
  if (argv[0] !== verb) return undefined;
  const rest = argv.filter((w) => w !== "--trust" && !w.startsWith("--trust="));
  return ["kerncap", ...rest.map(shownWord)].join(" ");
}
