/** `kerncap schema [NAME]`: the JSON Schema of the capture manifest (default) or of a verb's --json document. */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { escapeForTerminal } from "../../escape.ts";
import { editDistance } from "../../util/text.ts";
import { jsonSchemaOf, SCHEMA_NAMES } from "../../format/documents.ts";
import { frontends } from "../../frontends/index.ts";
import { jsonArg, verboseArg } from "../args.ts";

export default defineCommand({
  meta: {
    name: "schema",
    description: `Print a JSON Schema (draft-07, from the valibot schemas): the manifest, or a verb's --json document (${SCHEMA_NAMES.join(", ")})`,
  },
  args: {
    name: { type: "positional", description: `manifest (default) or a verb: ${SCHEMA_NAMES.join(", ")}`, required: false },
    ...jsonArg,
    ...verboseArg,
  },
  run({ args }) {
    const name = args.name ? String(args.name) : "manifest";
    const s = jsonSchemaOf(
      name,
      frontends().map((f) => f.name),
    );
    if (!s) {
      const near = SCHEMA_NAMES.filter((n) => editDistance(name, n) <= 2).sort((a, b) => editDistance(name, a) - editDistance(name, b))[0];
      throw new KerncapError(
        "E_USAGE",
        `no schema named ${escapeForTerminal(JSON.stringify(name), { oneLine: true })}${near ? `; did you mean ${near}?` : ""}`,
        {
          hint: `Names: ${SCHEMA_NAMES.join(", ")}.`,
        },
      );
    }
    process.stdout.write(JSON.stringify(s, null, 2) + "\n");
    return 0;
  },
});
