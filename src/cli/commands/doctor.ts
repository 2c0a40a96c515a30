/** `kerncap doctor`: what this machine has for capture, replay and reproducers (src/doctor.ts). Exit 0 with no fail, 2 otherwise; with --for WHAT, 0 when this machine can do that. */
import { defineCommand } from "citty";
import { runDoctor } from "../../doctor.ts";
import { jsonArg, printJson, verboseArg, printText } from "../args.ts";
import { KerncapError } from "../../errors.ts";

/** What --for asks, and the report's answer to it. */
const CAN = { build: "canBuild", replay: "canReplay", capture: "canCapture" } as const;

export default defineCommand({
  meta: {
    name: "doctor",
    description: "Check the driver, CUPTI, nvcc, Python/Triton/PyTorch, the cache folder, ASLR; with a GPU, a fixed-VA reservation and a tiny capture + replay",
  },
  args: {
    capture: {
      type: "boolean",
      default: true,
      description: "With a GPU: build, capture and replay a built-in kernel (a few seconds)",
      negativeDescription: "Skip the built-in capture + replay",
    },
    for: {
      type: "string",
      description:
        "Exit 0 when this machine can do it, 2 when not, whatever the other checks say: build (nvcc, cache, TMPDIR: a CI runner without a GPU), replay, capture",
      valueHint: "WHAT",
    },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const need = args.for === undefined ? undefined : String(args.for);
    if (need !== undefined && !(need in CAN))
      throw new KerncapError("E_USAGE", `--for ${JSON.stringify(need)}: doctor answers for build, replay or capture`, {
        hint: "kerncap doctor --for build (a CI runner that compiles candidates), --for replay, --for capture.",
      });
    const r = await runDoctor({ capture: args.capture !== false });
    if (args.json) printJson("doctor", r);
    else {
      const w = Math.max(...r.checks.map((c) => c.id.length));
      const L = r.checks.map(
        (c) =>
          `${c.status.padEnd(4)}  ${c.id.padEnd(w)}  ${c.detail}${c.fix && (c.status === "warn" || c.status === "fail") ? `\n${" ".repeat(w + 8)}fix: ${c.fix}` : ""}`,
      );
      const failed = r.checks.filter((c) => c.status === "fail").map((c) => c.id);
      const canNeed = need !== undefined && r[CAN[need as keyof typeof CAN]];
      // with --for, a failed check the asked work does not need is said as such (a new user's finding: "some checks failed",
      // then "can build here", read as a contradiction)
      const summary =
        r.verdict === "fail"
          ? `some checks failed (${failed.join(", ")})${canNeed ? `, none that ${need} needs` : ""}`
          : r.verdict === "warn"
            ? "usable, with warnings"
            : "everything checked is in order";
      printText(L.join("\n") + `\n${summary}\n`);
    }
    if (need !== undefined) {
      const can = r[CAN[need as keyof typeof CAN]];
      if (!args.json) printText(`${can ? "can" : "cannot"} ${need} here\n`);
      return can ? 0 : 2;
    }
    return r.verdict === "fail" ? 2 : 0;
  },
});
