/** `kerncap completion bash|zsh|fish`: a completion script generated from the verb table. */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { completionScript, verbSpecs } from "../completion.ts";
import { SCHEMA_NAMES } from "../../format/documents.ts";
import { verboseArg } from "../args.ts";

export default defineCommand({
  meta: { name: "completion", description: "Print a shell completion script (bash, zsh or fish), e.g. source <(kerncap completion bash)" },
  args: {
    shell: { type: "positional", description: "bash, zsh or fish", required: false },
    ...verboseArg,
  },
  async run({ args }) {
    const shell = String(args.shell ?? "");
    if (!shell)
      throw new KerncapError("E_USAGE", "completion needs SHELL (none given): bash, zsh or fish", {
        hint: "E.g. source <(kerncap completion bash), or kerncap completion fish > ~/.config/fish/completions/kerncap.fish.",
      });
    if (shell !== "bash" && shell !== "zsh" && shell !== "fish")
      throw new KerncapError("E_USAGE", `no completion for ${JSON.stringify(shell)}`, { hint: "Shells: bash, zsh, fish." });
    const { commands } = await import("../verbs.ts");
    process.stdout.write(completionScript(shell, await verbSpecs(commands), SCHEMA_NAMES));
    return 0;
  },
});
