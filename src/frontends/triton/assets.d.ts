// Files embedded in the executable: a path (`type: "file"`) or the text (`type: "text"`).
declare module "*.py" {
  const path: string;
  export default path;
}
declare module "*.hbs" {
  const text: string;
  export default text;
}
