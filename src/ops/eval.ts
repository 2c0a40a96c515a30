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
import { isKerncapError, KerncapError } from "../errors.ts";
import { evalCandidates, type EvalOptions } from "../eval/eval.ts";
import { probeGpu } from "../native/libcuda.ts";
import type { EvalReport } from "../eval/report.ts";
import { shellPath } from "../util/shell-quote.ts";
import { commandAgain, refuseUntrustedSource, requireTrustedBuild, requireTrustedCopy } from "./gates.ts";

/**
 * Run an evaluation (src/eval/eval.ts evalCandidates) behind its gates; `requireGpu` (eval
 * --require-gpu): no usable GPU here ends it before anything is read or built (a harness on a machine
 * without one learns it at once, not from each built candidate's E_NO_GPU).
 * @throws KerncapError E_NO_GPU (requireGpu), E_UNTRUSTED, and evalCandidates'
 */
export async function runEval(o: EvalOptions & { requireGpu?: boolean }): Promise<EvalReport> {
  if (o.requireGpu) {
    try {
      probeGpu();
    } catch (e) {
      if (!isKerncapError(e) || e.code !== "E_NO_GPU") throw e;
      throw new KerncapError("E_NO_GPU", `${e.message} (--require-gpu: nothing was built)`, {
        hint: "Evaluate on a machine with an NVIDIA GPU, or give --build-only instead to compile every candidate here (a record of verdict built for each that builds; --jsonl FILE, then --resume on a GPU machine judges them).",
        cause: e,
      });
    }
  }
  return evalCandidates(o, (dir, m) => {
    refuseUntrustedSource(m, o, () => ({
      message: `${dir} is a ${m.kernel.frontend} capture: its build imports each candidate's source, which runs as code with your rights, so a confined eval (kerncap mcp) runs it only with --trust`,
      hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton candidates run, or evaluate on the command line.",
    }));
    // the command a user can run as it is (nu10 #9: `kerncap eval DIR … --trust=` had a literal …): this eval's own
    // command line with the digest, what a CI script pins (nu13 #13); for kerncap mcp's agent (and where this process is
    // no eval command line), validate --build-only with the digest, which remembers the trust for the folder.
    // The files the build runs are carried in the message only where an agent reads it (confined: kerncap mcp),
    // else shown on stderr above the error, as validate shows them (the --json document: error.details.trust)
    const again = o.confine ? undefined : commandAgain("eval");
    requireTrustedBuild(dir, m, o.trust, {
      command: again ?? `kerncap validate ${shellPath(dir)} --build-only`,
      inMessage: o.confine ?? false,
      ...(again ? {} : { then: "then run the eval again" }),
    });
    return (copy, c) => requireTrustedCopy(dir, copy, m, o.trust, { name: `candidate ${c.label}`, inMessage: o.confine ?? false });
  });
}
