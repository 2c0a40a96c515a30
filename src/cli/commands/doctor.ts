/** `kerncap doctor`: what this machine has for capture, replay and reproducers (src/doctor.ts). Exit 0 with no fail, 2 otherwise. */
import { defineCommand } from "citty";
import { runDoctor } from "../../doctor.ts";
import { jsonArg, printJson, verboseArg, printText } from "../args.ts";

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
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const r = await runDoctor({ capture: args.capture !== false });
    if (args.json) printJson("doctor", r);
    else {
      const w = Math.max(...r.checks.map((c) => c.id.length));
      const L = r.checks.map(
        (c) =>
          `${c.status.padEnd(4)}  ${c.id.padEnd(w)}  ${c.detail}${c.fix && (c.status === "warn" || c.status === "fail") ? `\n${" ".repeat(w + 8)}fix: ${c.fix}` : ""}`,
      );
      printText(
        L.join("\n") + `\n${r.verdict === "fail" ? "some checks failed" : r.verdict === "warn" ? "usable, with warnings" : "everything checked is in order"}\n`,
      );
    }
    return r.verdict === "fail" ? 2 : 0;
  },
});
