declare module "*.so" {
  const path: string;
  export default path;
}
