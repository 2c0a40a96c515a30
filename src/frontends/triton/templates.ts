/** The Triton reproducer's templates (templates/triton/), embedded in the executable as text (src/frontends/templates.ts). */
import readme from "../../../templates/triton/README.md.hbs" with { type: "text" };
import buildSh from "../../../templates/triton/build.sh.hbs" with { type: "text" };
import reproPy from "../../../templates/triton/repro.py" with { type: "text" };
import type { TemplateFile } from "../templates.ts";

export const TRITON_TEMPLATES: readonly TemplateFile[] = [
  { path: "README.md.hbs", text: readme, mode: 0o644 },
  { path: "build.sh.hbs", text: buildSh, mode: 0o755 },
  { path: "repro.py", text: reproPy, mode: 0o755 },
];
