/** The HIP reproducer's templates (templates/hip/), embedded in the executable as text (src/frontends/templates.ts). */
import readme from "../../../templates/hip/README.md.hbs" with { type: "text" };
import buildSh from "../../../templates/hip/build.sh.hbs" with { type: "text" };
import type { TemplateFile } from "../templates.ts";

export const HIP_TEMPLATES: readonly TemplateFile[] = [
  { path: "README.md.hbs", text: readme, mode: 0o644 },
  { path: "build.sh.hbs", text: buildSh, mode: 0o755 },
];
