/**
 * `kerncap eval`'s workflow (the verb, src/cli/commands/eval.ts, parses and prints; MCP's
 * evaluate tool runs that verb with --confine): the evaluation of src/eval/eval.ts with its gates
 * (./gates.ts): a confined eval of a capture whose build runs each candidate's source only with
 * --trust, and the first input's build.sh, when received, only after --trust (in the error
 * itself: MCP's agent reads it); then each candidate's private copy, once made, through the same
 * trust gate over its own bytes (requireTrustedCopy: a received capture's build runs only bytes
 * the user trusted, a candidate's too). Each candidate's build is then confined by the build
 * itself (src/frontends/build.ts).
 */
import { evalCandidates, type EvalOptions } from "../eval/eval.ts";
import type { EvalReport } from "../eval/report.ts";
import { refuseUntrustedSource, requireTrustedBuild, requireTrustedCopy } from "./gates.ts";

/**
 * Run an evaluation (src/eval/eval.ts evalCandidates) behind its gates.
 * @throws KerncapError E_UNTRUSTED, and evalCandidates'
 */
export function runEval(o: EvalOptions): Promise<EvalReport> {
  return evalCandidates(o, (dir, m) => {
    refuseUntrustedSource(m, o, () => ({
      message: `${dir} is a ${m.kernel.frontend} capture: its build imports each candidate's source, which runs as code with your rights, so a confined eval (kerncap mcp) runs it only with --trust`,
      hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton candidates run, or evaluate on the command line.",
    }));
    requireTrustedBuild(dir, m, o.trust, { command: `kerncap eval ${dir} …`, inMessage: true });
    return (copy, c) => requireTrustedCopy(dir, copy, m, o.trust, { name: `candidate ${c.label}`, inMessage: o.confine ?? false });
  });
}
