// The export's templates, embedded in the executable as text (`type: "text"`): src/export/templates.ts.
declare module "*.c" {
  const text: string;
  export default text;
}
declare module "*/Makefile" {
  const text: string;
  export default text;
}
declare module "*.txt" {
  const text: string;
  export default text;
}
declare module "*.h" {
  const text: string;
  export default text;
}
